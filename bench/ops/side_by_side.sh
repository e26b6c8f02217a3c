#!/usr/bin/env bash
# The ops suite: the rules coder against PyTorch eager and torch.compile, on the GPU
# machine, in one call (docs/benchmarks.md's ops table):
#   1. `kernelskill run` (rules backend, the default) over the tasks: examples/tasks and
#      bench/suites/ops unless TASK files are given
#   2. `kernelskill export` of every task's best kernel: MODELS/TASK.py (ModelNew), each
#      exported and built as soon as the run writes the task's outcome (CPU only)
#   3. cli/side_by_side.py --prebuild: the load_inline builds left, in parallel processes,
#      and --warm-compile: torch.compile once per task, in parallel processes, so that
#      the side-by-side's torch.compile is served by inductor's on-disk caches
#   4. cli/side_by_side.py: eager, torch.compile and ours in one process per GPU (the
#      tasks dealt round-robin over the GPUs), merged into one table
# Results go to OUT: session.log, run_summary.md, side_by_side.md, side_by_side.json,
# prebuild.txt, models.tar.gz and logs/ (the run's stderr, each side-by-side process's
# log, the warm-ups' and the follower's).
#
#   bench/run.sh ops [TASK.yaml ...]           (builds kernelskill and kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/ops/side_by_side.sh [TASK.yaml ...]
# The defaults are the settings of the published table: SEEDS (2) ROUNDS (1) TRIALS (2,
# the run's reviews) SBS_TRIALS (3, side by side) REPS (30) COMPILE_TIMEOUT (60 s)
# WARM_PROCS (8) FOLLOW_JOBS (8); BUDGET (520 s for all of it: a device call is 600 s
# with the build) of which RESERVE (150) is kept from the run for what follows it and
# COMPARE_RESERVE (100) from the builds and warm-ups for the side by side.
#   GPUS="0 1" (default: all) the GPUs to use; WORK (default /tmp/ks-suite) the working
#   directory; STAGES="run export prebuild warm compare" picks stages; MODELS=DIR and
#   RUN_DIR=DIR use exported models and a run from an earlier call.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
root=$bench_root
out=$OUT
tasks=("$@")
if [ ${#tasks[@]} -eq 0 ]; then tasks=("$root"/examples/tasks/*.yaml "$root"/bench/suites/ops/*.yaml); fi
work="${WORK:-/tmp/ks-suite}"
stages="${STAGES:-run export prebuild warm compare}"
budget="${BUDGET:-520}"
left() { bench_left "$budget"; }
log() { bench_log "$@"; }
has() { [[ " $stages " == *" $1 "* ]]; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$ngpu" -ge 1 ] || ngpu=1
read -r -a gpus <<<"${GPUS:-$(seq -s ' ' 0 $(( ngpu - 1 )))}"   # GPUS="1": only GPU 1
ngpu=${#gpus[@]}
log "ops suite: ${#tasks[@]} tasks, $ngpu GPU(s), stages: $stages; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

ks="$BUILD/bin/kernelskill"

models="${MODELS:-$work/models}"
declare -A task_name=()
while read -r path name; do task_name[$path]=$name; done < <("$PYTHON" -c '
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
      while [ "$(jobs -rp | wc -l)" -ge "${FOLLOW_JOBS:-8}" ]; do sleep 1; done
      MAX_JOBS=2 "$PYTHON" "$root/cli/side_by_side.py" --build-one "$models/$name.py" --models "$models" &
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
    echo "review: {trials: ${TRIALS:-2}}"
    echo "memory: {path: \"$work/memory\"}"
    echo "output: {dir: \"$run_dir\"}"
  } >"$work/experiment.yaml"
  t=$(( $(left) - ${RESERVE:-150} )); [ $t -lt 60 ] && t=60
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
  t=$(( $(left) - ${COMPARE_RESERVE:-100} )); [ $t -lt 60 ] && t=60
  pids=()
  if has prebuild; then
    pj=$(( $(nproc) / 3 )); [ $pj -ge 1 ] || pj=1
    log "prebuild (load_inline, $pj processes, at most $t s)"
    MAX_JOBS=2 timeout -k 5 $t "$PYTHON" "$root/cli/side_by_side.py" --prebuild --models "$models" \
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
      TORCHINDUCTOR_COMPILE_THREADS=4 PYTHONUNBUFFERED=1 timeout -k 5 $t "$PYTHON" "$root/cli/side_by_side.py" \
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
    PYTHONUNBUFFERED=1 timeout -k 5 $t "$PYTHON" "$root/cli/side_by_side.py" --models "$models" --run-dir "$run_dir" \
      --device "$g" --trials "${SBS_TRIALS:-3}" --reps "${REPS:-30}" --compile-timeout "${COMPILE_TIMEOUT:-60}" \
      --out "$work/sbs-$g.json" "${mine[@]}" >"$work/sbs-$g.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  "$PYTHON" "$root/cli/side_by_side.py" --merge "$work"/sbs-*.json --md "$out/side_by_side.md" >/dev/null
  "$PYTHON" -c 'import json, sys; json.dump([r for p in sys.argv[2:] for r in json.load(open(p))], open(sys.argv[1], "w"), indent=1)' \
    "$out/side_by_side.json" "$work"/sbs-*.json
  grep -hE "Error|error|Traceback" "$work"/sbs-*.log | head -20 >>"$out/session.log"
  tail -4 "$out/side_by_side.md" | tee -a "$out/session.log"
fi
mkdir -p "$out/logs"
cp "$work"/sbs-*.log "$work"/warm-*.log "$work/follow.log" "$work/run.err" "$out/logs/" 2>/dev/null
log "ops suite done"
