#!/usr/bin/env bash
# On the GPU machine: what the CUPTI profile costs a review at
# KernelBench's published sizes under each replay mode (gpus.profile_replay), and
# whether the two modes report the same metrics.
#
#   bench/run.sh profile-replay KERNELBENCH_DIR [PROBLEM ...]  (builds kernelskill, kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/reviewer/profile_replay.sh KERNELBENCH_DIR [PROBLEM ...]
#
# For each KernelBench level-1 problem named (default: 19_ReLU 23_Softmax 40_LayerNorm
# 47_Sum_reduction_over_a_dimension): import it, lower one seed with the rules coder,
# and review that seed with `kernelskill-gpu --review --trials 1 --json` once per replay
# mode (user first; kernel only for problems listed in KERNEL_REPLAY, default the first,
# since it costs minutes at these sizes). Then the three example plans of
# bench/reviewer/profile_vs_ncu.sh at their own sizes in both modes. Writes OUT/replay.md (the
# review's phase times per mode, and each metric under both modes) and the JSON.
set -uo pipefail
kb=${1:?usage: bench/reviewer/profile_replay.sh KERNELBENCH_DIR [PROBLEM ...]}
shift
problems=("$@")
[ ${#problems[@]} -gt 0 ] || problems=(19_ReLU 23_Softmax 40_LayerNorm 47_Sum_reduction_over_a_dimension)
kernel_replay=${KERNEL_REPLAY:-${problems[0]}}
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
out=$OUT
work=${WORK:-/tmp/profile-replay}
mkdir -p "$work/problems" "$work/out"
bin="$BUILD/bin"
for p in "${problems[@]}"; do cp "$kb/level1/$p.py" "$work/problems/"; done
"$bin/kernelskill" import kernelbench "$work/problems" --out "$work/tasks" >"$work/out/import.log" 2>&1 || tail -5 "$work/out/import.log"
res="$work/out"  # per-review JSON and logs; packed into $OUT/profile-replay.tgz at the end
review() {  # name task cu plan mode
  local name=$1 task=$2 cu=$3 plan=$4 mode=$5 t0 t1
  t0=$(date +%s.%N)
  timeout 400 "$bin/kernelskill-gpu" --review "$task" --source "$cu" --plan "$plan" --trials 1 --no-time \
    --profile-replay "$mode" --json --log-level info >"$res/$name.$mode.json" 2>"$res/$name.$mode.log"
  local rc=$?
  t1=$(date +%s.%N)
  echo "$name $mode exit $rc wall $("$PYTHON" -c "print(round($t1-$t0,1))") s" | tee -a "$out/walls.txt"
}
for p in "${problems[@]}"; do
  task="$work/tasks/problems/$p.yaml"
  [ -f "$task" ] || { echo "$p: not imported" | tee -a "$out/walls.txt"; continue; }
  t0=$(date +%s)
  timeout 240 "$bin/kernelskill" lower "$task" --seeds 1 --out "$work/lowered/$p" >"$res/$p.lower.log" 2>&1 \
    || { echo "$p: lower failed" | tee -a "$out/walls.txt"; tail -3 "$res/$p.lower.log"; continue; }
  echo "$p lower $(( $(date +%s) - t0 )) s" | tee -a "$out/walls.txt"
  "$bin/kernelskill-gpu" --graph "$task" --log-level info 2>&1 >/dev/null | grep -o 'probed on [a-z]*\|not probed on [a-z]*: .\{0,120\}' >>"$out/walls.txt"
  review "$p" "$task" "$work/lowered/$p/seed-0.cu" "$work/lowered/$p/seed-0.yaml" user
  case " $kernel_replay " in *" $p "*) review "$p" "$task" "$work/lowered/$p/seed-0.cu" "$work/lowered/$p/seed-0.yaml" kernel ;; esac
done
# The example plans at their own sizes (what docs/metrics.md compared with ncu).
cat >"$work/relu.yaml" <<'EOF'
name: relu
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [8192, 8192], init: {kind: normal, mean: 0, std: 1}}
seed: 2
EOF
for e in "relu $work/relu.yaml" "gelu_vec4 examples/tasks/gelu.yaml" "softmax_rows examples/tasks/softmax.yaml"; do
  set -- $e
  for mode in user kernel; do review "$1" "$2" "examples/plans/$1.cu" "examples/plans/$1.yaml" $mode; done
done
"$PYTHON" - "$res" <<'PY' >"$out/replay.md"
import glob, json, os, sys
out = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    name, mode = os.path.basename(f)[:-5].rsplit(".", 1)
    try:
        runs.setdefault(name, {})[mode] = json.load(open(f))
    except Exception as e:
        runs.setdefault(name, {})[mode] = {"error": str(e)}
print("| problem | mode | status | compile s | inputs s | reference s | verify s | profile s | kernel ms |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name, modes in runs.items():
    for mode, r in modes.items():
        ph = r.get("phases", {})
        g = lambda k: "%.2f" % ph[k] if isinstance(ph.get(k), (int, float)) else "-"
        prof = r.get("profile", {})
        print(f"| {name} | {mode} | {r.get('status', r.get('error'))} | {g('compile_s')} | {g('inputs_s')} | "
              f"{g('reference_s')} | {g('verify_s')} | {g('profile_s')} | {prof.get('duration_ms', '-')} |")
print()
for name, modes in runs.items():
    if "user" not in modes or "kernel" not in modes: continue
    u = modes["user"].get("profile", {}).get("values", {})
    k = modes["kernel"].get("profile", {}).get("values", {})
    print(f"### {name}: metrics, user / kernel replay\n")
    print("| metric | user | kernel | diff % |")
    print("| --- | --- | --- | --- |")
    for m in sorted(set(u) | set(k)):
        a, b = u.get(m), k.get(m)
        d = "-" if a is None or b is None or b == 0 else "%.1f" % (100 * (a - b) / abs(b))
        print(f"| {m} | {a} | {b} | {d} |")
    print()
PY
tar -czf "$out/profile-replay.tgz" -C "$work" out
cat "$out/walls.txt"
head -12 "$out/replay.md"
