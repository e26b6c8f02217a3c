#!/usr/bin/env bash
# The rules coder against PyTorch eager and torch.compile, on the GPU machine, in one call:
#   1. build kernelskill and kernelskill-gpu (BUILD, default /tmp/ks-build-gb: outside
#      the copied tree, so a warm machine keeps it between calls)
#   2. `kernelskill run` (rules backend, the default) over the tasks: examples/tasks and
#      bench/suites/ops unless TASK files are given
#   3. `kernelskill export` of every task's best kernel: MODELS/TASK.py (ModelNew)
#   4. cli/side_by_side.py --prebuild: the load_inline builds, in parallel processes,
#      and --warm-compile: torch.compile once per task, in parallel processes, so that
#      the side-by-side's torch.compile is served by inductor's on-disk caches
#   5. cli/side_by_side.py: eager, torch.compile and ours in one process per GPU (the
#      tasks dealt round-robin over the GPUs), merged into one table
# Results go to OUT_DIR as a few flat files: session.log, run_summary.md,
# side_by_side.md, side_by_side.json, prebuild.txt, models.tar.gz.
#
#   source .devdeps/env.sh && bench/suite_gpu.sh OUT_DIR [TASK.yaml ...]
#   SEEDS (2) ROUNDS (1) TRIALS (3, the reviews) SBS_TRIALS (3, side by side) REPS (30)
#   BUDGET (seconds for the whole call, 570)
#   GPUS="0 1" (default: all) the GPUs to use
#   SKIP_BUILD=1 reuses BUILD as it is; STAGES="run export prebuild warm compare" picks
#   stages; MODELS=DIR and RUN_DIR=DIR use exported models and a run from an earlier call.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: bench/suite_gpu.sh OUT_DIR [TASK.yaml ...]}"
shift
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tasks=("$@")
if [ ${#tasks[@]} -eq 0 ]; then tasks=("$root"/examples/tasks/*.yaml "$root"/bench/suites/ops/*.yaml); fi
build="${BUILD:-/tmp/ks-build-gb}"
work="${WORK:-/tmp/ks-suite}"
stages="${STAGES:-run export prebuild warm compare}"
budget="${BUDGET:-570}"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( budget - $(elapsed) )); }
log() { echo "[$(elapsed) s] $*" | tee -a "$out/session.log"; }
has() { [[ " $stages " == *" $1 "* ]]; }
cd "$root"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$ngpu" -ge 1 ] || ngpu=1
read -r -a gpus <<<"${GPUS:-$(seq -s ' ' 0 $(( ngpu - 1 )))}"   # GPUS="1": only GPU 1
ngpu=${#gpus[@]}
log "suite_gpu: ${#tasks[@]} tasks, $ngpu GPU(s), stages: $stages; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

if [ -z "${SKIP_BUILD:-}" ]; then
  log "configure + build in $build"
  cmake -S . -B "$build" -G Ninja ${KS_CMAKE_ARGS:-} -DKS_BUILD_TESTS=OFF >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  if ! cmake --build "$build" -j"$(nproc)" --target kernelskill kernelskill-gpu ks-compile-latency >>"$out/build.log" 2>&1; then
    grep -E "error|FAILED" "$out/build.log" | head -30 | tee -a "$out/session.log"
    exit 1
  fi
  log "built"
fi
ks="$build/bin/kernelskill"

models="${MODELS:-$work/models}"
declare -A task_name=()
while read -r path name; do task_name[$path]=$name; done < <(python3 -c '
import sys, yaml
for p in sys.argv[1:]: print(p, yaml.safe_load(open(p))["name"])' "${tasks[@]}")

export_one() {  # TASK_PATH: run_dir's kernel of that task -> $models/NAME.py
  local name=${task_name[$1]}
  [ -f "$run_dir/tasks/$name/kernel.cu" ] || { echo "export $name: no kernel in the run"; return 1; }
  "$ks" export --task "$1" --run-dir "$run_dir" --out "$models/$name.py"
}

follow() {
  mkdir -p "$models"
  local -A seen=()
  local fin
  while :; do
    fin=0
    [ -f "$work/run.done" ] && fin=1
    for t in "${tasks[@]}"; do
      name=${task_name[$t]}
      [ -n "${seen[$name]:-}" ] && continue
      [ -f "$run_dir/tasks/$name/outcome.json" ] || continue
      seen[$name]=1
      export_one "$t" || continue
      while [ "$(jobs -rp | wc -l)" -ge "${FOLLOW_JOBS:-12}" ]; do sleep 1; done
      MAX_JOBS=2 python3 "$root/cli/side_by_side.py" --build-one "$models/$name.py" --models "$models" &
    done
    [ $fin = 1 ] && break
    sleep 2
  done
  wait
}

# 2. kernelskill run.
mkdir -p "$work"
run_dir="${RUN_DIR:-$work/run}"
if has run; then
  rm -rf "$work/memory" "$run_dir" "$models"
  {
    echo "name: suite-side-by-side"
    echo "tasks:"
    for t in "${tasks[@]}"; do echo "  - $(cd "$(dirname "$t")" && pwd)/$(basename "$t")"; done
    echo "gpus: {local: [$(IFS=,; echo "${gpus[*]}")]}"
    echo "budgets: {seeds: ${SEEDS:-2}, rounds: ${ROUNDS:-1}, repair_attempts: 1, tasks_in_flight: $(( 2 * ngpu ))}"
    echo "review: {trials: ${TRIALS:-3}}"
    echo "memory: {path: \"$work/memory\"}"
    echo "output: {dir: \"$run_dir\"}"
  } >"$work/experiment.yaml"
  t=$(( $(left) - ${RESERVE:-200} )); [ $t -lt 60 ] && t=60
  follower=""
  if has export && has prebuild; then
    # Export and build each task's module as soon as the run has written its outcome
    # (CPU only: nvcc and the host compiler; the GPUs stay with the run).
    rm -f "$work/run.done"
    follow >"$work/follow.log" 2>&1 &
    follower=$!
  fi
  log "kernelskill run (at most $t s)"
  timeout -k 10 $t "$ks" run "$work/experiment.yaml" >"$work/run.out" 2>"$work/run.err"
  log "kernelskill run exit status $? (124: stopped at the time bound)"
  touch "$work/run.done"
  cp "$run_dir/summary.md" "$out/run_summary.md" 2>/dev/null
  grep -iE "error|warn" "$work/run.err" | head -20 >>"$out/session.log"
  grep -E "^\[" "$work/run.err" | grep -E "done|failed" | tail -80 >>"$out/session.log"
fi

# 3. Export every task's best kernel (those the follower has not exported yet).
if has export; then
  if [ -n "${follower:-}" ]; then
    wait "$follower"
    log "follower: $(grep -c '^prebuild .* ok ' "$work/follow.log") modules built during the run, $(grep -c FAILED "$work/follow.log") failed"
  fi
  mkdir -p "$models"
  n=0
  for t in "${tasks[@]}"; do
    name=${task_name[$t]}
    [ -f "$models/$name.py" ] || export_one "$t" >>"$out/session.log" 2>&1
    [ -f "$models/$name.py" ] && n=$((n + 1))
  done
  log "exported $n models"
  # The models and the run's per-task results, for a later call (MODELS=, RUN_DIR=).
  tar -czf "$out/models.tar.gz" --exclude build -C "$work" models run/summary.md run/summary.json run/tasks 2>/dev/null
fi

# 4. Build the extensions in parallel and, beside it, fill torch.compile's caches
#    (WARM_PROCS processes, the tasks dealt round-robin over them and the GPUs).
if has prebuild || has warm; then
  t=$(( $(left) - ${COMPARE_RESERVE:-200} )); [ $t -lt 60 ] && t=60
  pids=()
  if has prebuild; then
    pj=$(( $(nproc) / 3 )); [ $pj -ge 1 ] || pj=1
    log "prebuild (load_inline, $pj processes, at most $t s)"
    MAX_JOBS=2 timeout -k 5 $t python3 "$root/cli/side_by_side.py" --prebuild --models "$models" \
      --jobs $pj >"$out/prebuild.txt" 2>&1 &
    pids+=($!)
  fi
  if has warm; then
    nw=${WARM_PROCS:-8}
    log "torch.compile warm-up in $nw processes (at most $t s)"
    for w in $(seq 0 $(( nw - 1 ))); do
      mine=()
      for i in "${!tasks[@]}"; do [ $(( i % nw )) -eq "$w" ] && mine+=("${tasks[$i]}"); done
      [ ${#mine[@]} -gt 0 ] || continue
      TORCHINDUCTOR_COMPILE_THREADS=4 PYTHONUNBUFFERED=1 timeout -k 5 $t python3 "$root/cli/side_by_side.py" \
        --warm-compile --models "$models" --device "${gpus[$(( w % ngpu ))]}" "${mine[@]}" >"$work/warm-$w.log" 2>&1 &
      pids+=($!)
    done
  fi
  for p in "${pids[@]}"; do wait "$p"; done
  has prebuild && log "prebuild: $(tail -1 "$out/prebuild.txt")"
  has warm && log "warm-up: $(cat "$work"/warm-*.log | grep -c '^warm .* s$') tasks compiled; $(cat "$work"/warm-*.log | grep -c failed) failed"
fi

# 5. Side by side, one process per GPU.
if has compare; then
  t=$(( $(left) - 15 )); [ $t -lt 30 ] && t=30
  log "side_by_side on $ngpu GPU(s) (at most $t s)"
  pids=()
  for j in "${!gpus[@]}"; do
    g=${gpus[$j]}
    mine=()
    for i in "${!tasks[@]}"; do [ $(( i % ngpu )) -eq "$j" ] && mine+=("${tasks[$i]}"); done
    PYTHONUNBUFFERED=1 timeout -k 5 $t python3 "$root/cli/side_by_side.py" --models "$models" --run-dir "$run_dir" \
      --device "$g" --trials "${SBS_TRIALS:-3}" --reps "${REPS:-30}" --compile-timeout "${COMPILE_TIMEOUT:-120}" \
      --out "$work/sbs-$g.json" "${mine[@]}" >"$work/sbs-$g.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  python3 "$root/cli/side_by_side.py" --merge "$work"/sbs-*.json --md "$out/side_by_side.md" >/dev/null
  python3 -c 'import json, sys; json.dump([r for p in sys.argv[2:] for r in json.load(open(p))], open(sys.argv[1], "w"), indent=1)' \
    "$out/side_by_side.json" "$work"/sbs-*.json
  grep -hE "Error|error|Traceback" "$work"/sbs-*.log | head -20 >>"$out/session.log"
  tail -4 "$out/side_by_side.md" | tee -a "$out/session.log"
fi
log "suite_gpu done"
