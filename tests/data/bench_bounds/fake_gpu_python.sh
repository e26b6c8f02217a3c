#!/bin/sh
# The user's Python for `kernelskill bench` on a machine without a GPU, as a bench on a
# GPU machine would see it at its worst (bench_cli_test "[bounds]"): it says PyTorch sees
# one GPU, and its measuring process never finishes a problem — it says which problem it
# is in (--kb-current, as side_by_side.py does) and waits on a child that sleeps, as a
# hung build, compile or kernel would. Everything else (the import, the builds, the
# warm-ups) is the real Python ($KS_REAL_PYTHON) running the real script.
real=${KS_REAL_PYTHON:-/usr/bin/python3}
case " $* " in
  *" -c "*device_count*)
    echo "0.0-stand-in"
    echo 1
    echo 85899345920
    exit 0
    ;;
  *" --kb-measure "*)
    manifest="" current=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --kb-manifest) manifest=$2; shift ;;
        --kb-current) current=$2; shift ;;
      esac
      shift
    done
    "$real" - "$manifest" "$current" <<'PY'
import json, os, sys, time
key = json.load(open(sys.argv[1]))["problems"][0]["key"]
with open(sys.argv[2] + ".tmp", "w") as f:
    json.dump({"key": key, "phase": "torch.compile and timing", "started": time.time(), "pid": os.getppid()}, f)
os.replace(sys.argv[2] + ".tmp", sys.argv[2])
PY
    sleep 600 &
    echo $! >> "$KS_SLEEPS"
    wait
    ;;
  *)
    exec "$real" "$@"
    ;;
esac
