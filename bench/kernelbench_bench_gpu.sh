#!/usr/bin/env bash
# On the GPU machine (issue 15, item 4): `kernelskill bench` over KernelBench's own
# problem files at their published sizes -- problems 1-40 of level 1 and 1-30 of level 2
# by KernelBench's numbering (a prefix, not a pick: L1 and L2 change it) -- resumable
# across device calls. The output directory is build-gpu/kb-bench (ignored by git, so a
# warm machine keeps it between calls); each call builds, runs the bench until BUDGET
# seconds are spent, stops it (its process group: the GPU workers and the Python
# measurement with it), and copies the bench's log and, when it got that far, summary.md,
# summary.json and the pictures to $OUT. Run the same command again until the last line
# says "measured": finished steps are kept (an imported problem, a finished task, an
# exported kernel, a measured problem), a task that was running resumes from its last
# completed round.
#
# A machine that went cold between calls has lost build-gpu/kb-bench: each call also
# writes $OUT/kb-bench.tgz, the directory without what can be made again there (the
# imported modules' .pt files, which the import step re-creates from the problem files
# when it finds them missing, and the models' builds); carry it back as
# .kbstate/kb-bench.tgz (STATE= names another path) and the next call starts from it.
#
#   bench/kernelbench_bench_gpu.sh [KERNELBENCH_DIR]     (default .devdeps/KernelBench)
#   L1 (40) L2 (30): the problems 1..N of each level; SEEDS (2) ROUNDS (1) TRIALS (3,
#   the run's reviews) ABLATION (full; e.g. full,no-ltm) REPS (30) SBS_TRIALS (3) JOBS (14)
#   BUDGET (560 s for the whole call) FRESH=1 starts over (removes build-gpu/kb-bench)
set -uo pipefail
cd "$(dirname "$0")/.."
kb=${1:-.devdeps/KernelBench}
out=${OUT:-kb-bench-out}
dir=build-gpu/kb-bench
budget=${BUDGET:-560}
mkdir -p "$out"
source .devdeps/env.sh
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16 --target kernelskill kernelskill-gpu; } >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"; echo "kernelbench_bench_gpu: build failed"; exit 1
fi
[ -n "${FRESH:-}" ] && rm -rf "$dir"
state=${STATE:-.kbstate/kb-bench.tgz}
if [ ! -d "$dir" ] && [ -z "${FRESH:-}" ] && [ -f "$state" ]; then
  tar -xzf "$state" -C build-gpu && echo "kernelbench_bench_gpu: resumed from $state" | tee -a "$out/build.log"
fi
mkdir -p "$dir"
files=()
for level in 1 2; do
  n=$([ $level = 1 ] && echo "${L1:-40}" || echo "${L2:-30}")
  for f in "$kb/level$level"/*.py; do
    k=$(basename "$f"); k=${k%%_*}
    [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -le "$n" ] && files+=("$f")
  done
done
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$ngpu" -ge 1 ] || ngpu=1
cat >"$dir.yaml" <<YAML
name: kernelbench-bench
gpus: {local: all, review_timeout_s: 300}
budgets: {seeds: ${SEEDS:-2}, rounds: ${ROUNDS:-1}, repair_attempts: 1, tasks_in_flight: $(( 2 * ngpu ))}
review: {trials: ${TRIALS:-3}}
YAML
echo "kernelbench_bench_gpu: ${#files[@]} problems, $ngpu GPU(s), $(left) s left after the build" | tee "$out/bench.log"
# Its own process group, so that stopping it stops its workers and Python children too.
setsid build-gpu/bin/kernelskill bench "${files[@]}" --out "$dir" --config "$dir.yaml" \
  --ablation "${ABLATION:-full}" --python python3 --jobs "${JOBS:-14}" --reps "${REPS:-30}" \
  --trials "${SBS_TRIALS:-3}" >>"$out/bench.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  if [ "$(left)" -le 20 ]; then
    echo "kernelbench_bench_gpu: time is up: stopping the bench (run this again to go on)" | tee -a "$out/bench.log"
    kill -TERM -- "-$pid" 2>/dev/null; sleep 8; kill -KILL -- "-$pid" 2>/dev/null
    break
  fi
  sleep 5
done
wait "$pid"; rc=$?
cp "$dir"/summary.md "$dir"/summary.json "$dir"/*.svg "$out/" 2>/dev/null
for v in "$dir"/variants/*/; do [ -d "$v" ] && cp "$v/rounds.json" "$out/rounds-$(basename "$v").json" 2>/dev/null; done
cp "$dir"/measure/results-*.jsonl "$out/" 2>/dev/null
tar -czf "$out/kb-bench.tgz" --exclude='*.pt' --exclude='kb-bench/measure/build' -C build-gpu kb-bench 2>/dev/null &&
  echo "kernelbench_bench_gpu: state for the next call in kb-bench.tgz ($(du -k "$out/kb-bench.tgz" | cut -f1) KiB; the device returns files up to 16 MiB)"
echo "kernelbench_bench_gpu: exit $rc after $(( $(date +%s) - t0 )) s"
grep -E "^kernelskill bench: \[(import|run [a-z-]+|export [a-z-]+|measure)\] (complete|done|skipped|[0-9]+ of)" "$out/bench.log" | tail -12
grep -A4 "^kernelskill bench: /" "$out/bench.log" | tail -6
