#!/usr/bin/env bash
# On the GPU machine: a whole `kernelskill run` (rules coder) over KernelBench level-1
# problems at their published sizes, and its throughput: tasks per GPU-hour and the
# review phase breakdown from summary.json.
#
#   bench/run.sh kb-throughput KERNELBENCH_DIR [N_PROBLEMS] [SECONDS]
#   BUILD=DIR OUT=DIR PYTHON=PY bench/kernelbench/run_throughput.sh KERNELBENCH_DIR [N_PROBLEMS] [SECONDS]
#
# Takes the first N_PROBLEMS (default 40) level-1 problems in KernelBench's order,
# imports them, and runs them with SEEDS (4) seeds x ROUNDS (5) rounds, TASKS_IN_FLIGHT
# (2) at once, for at most SECONDS (default 420): tasks that did not finish by then are
# reported as pending, and the throughput is finished tasks over the wall time. Writes
# $OUT/run-summary.md, $OUT/run-summary.json and $OUT/run-throughput.txt.
set -uo pipefail
kb=${1:?usage: bench/kernelbench/run_throughput.sh KERNELBENCH_DIR [N_PROBLEMS] [SECONDS]}
n=${2:-40}
limit=${3:-420}
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
out=$OUT
work=${WORK:-/tmp/kernelbench-run}
build=$BUILD
mkdir -p "$work/problems/level1"
for f in $(ls "$kb/level1" | grep '\.py$' | sort -V | head -n "$n"); do cp "$kb/level1/$f" "$work/problems/level1/"; done
t0=$(date +%s)
"$build/bin/kernelskill" import kernelbench "$work/problems/level1" --out "$work/tasks" --python "$PYTHON" --jobs 14 \
  >"$work/import.log" 2>&1
t1=$(date +%s)
cat >"$work/experiment.yaml" <<YAML
name: kernelbench-level1-throughput
tasks: [tasks/level1/*.yaml]
budgets: {seeds: ${SEEDS:-4}, rounds: ${ROUNDS:-5}, tasks_in_flight: ${TASKS_IN_FLIGHT:-2}}
memory: {path: "$work/memory"}
output: {dir: "$work/run"}
YAML
timeout --signal=INT "$limit" "$build/bin/kernelskill" run "$work/experiment.yaml" >"$work/run.log" 2>&1
rc=$?
t2=$(date +%s)
cp "$work/run/summary.md" "$out/run-summary.md" 2>/dev/null
cp "$work/run/summary.json" "$out/run-summary.json" 2>/dev/null
"$PYTHON" - "$work/run/summary.json" "$((t2 - t1))" "$(grep -c '\.yaml' "$work/import.log")" <<'PY' | tee "$out/run-throughput.txt"
import json, sys
path, wall, imported = sys.argv[1], float(sys.argv[2]), sys.argv[3]
try:
    s = json.load(open(path))
except Exception as e:
    print(f"no summary: {e}"); sys.exit(0)
tasks = s.get("tasks", [])
done = len(tasks)
ok = sum(1 for t in tasks if t.get("success"))
ph = s.get("review_phases", {})
reviews = sum(t.get("reviews", 0) for t in tasks)
print(f"imported {imported}; finished {done} tasks ({ok} correct), {len(s.get('pending', []))} pending, in {wall:.0f} s")
print(f"throughput: {3600 * done / wall:.1f} tasks per GPU-hour (one GPU); {reviews} reviews, "
      f"{reviews / wall:.2f} reviews/s")
if "device_busy_fraction" in s:
    print(f"run summary: {s.get('tasks_per_hour', 0):.1f} tasks/hour until the last finished task; "
          f"reviews kept the device busy {100 * s['device_busy_fraction']:.0f}% of that time")
if ph:
    tot = ph.get("total_s", 0)
    print("review time %.1f s (%.0f%% of the wall): " % (tot, 100 * tot / wall) +
          ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in ph.items() if k != "total_s"))
PY
echo "run_throughput: import $((t1 - t0)) s, run $((t2 - t1)) s (exit $rc)"
tail -5 "$work/run.log"
