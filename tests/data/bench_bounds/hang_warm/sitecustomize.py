# For bench_cli_test "[bounds]": put this folder on PYTHONPATH with KS_HANG_WARM naming a
# file, and every torch.compile warm-up worker of cli/side_by_side.py (--kb-warm-worker)
# hangs before its first problem, as a compile that never ends would: it waits on a child that
# sleeps for ten minutes, whose pid it appends to that file so the test can see it was
# killed. Nothing else is touched (the parent, --kb-warm, runs as it is).
import os
import sys

if os.environ.get("KS_HANG_WARM") and "--kb-warm-worker" in sys.argv:
    import subprocess

    child = subprocess.Popen(["sleep", "600"])
    with open(os.environ["KS_HANG_WARM"], "a") as f:
        f.write(f"{child.pid}\n")
    child.wait()
