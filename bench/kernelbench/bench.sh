#!/usr/bin/env bash
# The KernelBench suite, on the GPU machine: `kernelskill bench` over KernelBench's own
# problem files at their published sizes -- problems 1-40 of level 1 and 1-30 of level 2
# by KernelBench's numbering (a prefix, not a pick: L1 and L2 change it) -- across
# device calls. The bench's directory is BUILD/kb-bench (BUILD is ignored by git, so a
# warm machine keeps it between calls).
#
# The bench runs in its own session (setsid), so it outlives the call that started it:
# each call either starts it (after building) or, when one is running already, follows
# it, for at most BUDGET seconds; then it copies the bench's log (BUILD/kb-bench.log)
# and, once there, summary.md, summary.json and the per-problem rows to $OUT and returns, leaving the bench
# running. Call again within the machine's 30 s of warmth to go on; the last line says
# "finished" with the bench's exit status once it has ended. STOP=1 stops a running bench
# (its process group: the GPU workers and the Python children with it) at the end of the
# call instead.
#
# A machine that went cold between calls has lost BUILD/kb-bench (and the running
# bench): each call also writes $OUT/kb-bench.tgz, the directory without what can be
# made again there (the imported modules' .pt files, which the import step re-creates
# from the problem files where a task still has to run or be exported, the models' builds and
# torch.compile's cache); carry it back as .kbstate/kb-bench.tgz (STATE= names another
# path) and the next call starts a bench from it: the finished steps are kept (an
# imported problem, a finished task, an exported kernel, a measured problem), a task
# that was running resumes from its last completed round.
#
#   bench/run.sh kernelbench [KERNELBENCH_DIR]    (builds kernelskill, kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/kernelbench/bench.sh [KERNELBENCH_DIR]
#   KERNELBENCH_DIR: KernelBench's KernelBench/ folder (default .devdeps/KernelBench)
#   L1 (40) L2 (30) L3 (0): the problems 1..N of each level; SEEDS (2) ROUNDS (1) TRIALS (3,
#   the run's reviews) ABLATION (full; e.g. full,no-ltm) REPS (30) SBS_TRIALS (3) JOBS (14)
#   IN_FLIGHT (4 tasks per GPU: 87 % of the device busy, against 62-67 % with 2)
#   BUDGET (560 s for the whole call) FRESH=1 starts over (removes BUILD/kb-bench)
#   PICK1 / PICK2 / PICK3: instead of the prefixes, the problems of each level by number
#   ("7,9,41-46"; a level whose PICK is unset or empty is left out once any is set):
#   to measure what a change touched, against the last full run's table; level 3's
#   networks: PICK3=1-50 (bench/run.sh kb-lower checks on the CPU that they lower)
#   LIST: instead of either, a file naming the problems, one "levelN/FILE.py" a line
#   under KERNELBENCH_DIR (# starts a comment); NAME (kb-bench): the bench's directory,
#   log and state under BUILD and in $OUT (bench/kernelbench/ablation.sh sets both)
#   DONE_IN=CSV:RUN: leave out the problems CSV (docs/results/kernelbench.csv's format)
#   has a row of run RUN for: a run at one commit carried across sessions, whose
#   bench directory does not outlive the session (each session checks in its rows;
#   bench/kernelbench/at_commit.sh builds that commit's tree for the next)
#   COMMIT: the commit the per-problem rows (results-VARIANT.csv, copied to $OUT with
#   the summary) name, where the machine's copy of the tree has no .git to tell
#   (e.g. COMMIT=$(git rev-parse --short=7 HEAD) on the machine that sends the call)
set -uo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
kb=${1:-.devdeps/KernelBench}
out=$OUT
name=${NAME:-kb-bench}
dir=$BUILD/$name
log=$BUILD/$name.log
pidfile=$BUILD/$name.pid
budget=${BUDGET:-560}
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
pid=$(cat "$pidfile" 2>/dev/null)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  echo "kernelbench_bench_gpu: following the bench started by an earlier call (pid $pid)" | tee -a "$log"
else
  [ -n "${FRESH:-}" ] && rm -rf "$dir" "$log"
  state=${STATE:-.kbstate/$name.tgz}
  if [ ! -d "$dir" ] && [ -z "${FRESH:-}" ] && [ -f "$state" ]; then
    tar -xzf "$state" -C "$BUILD" && echo "kernelbench_bench_gpu: resumed from $state" | tee -a "$log"
  fi
  mkdir -p "$dir"
  files=()
  # in_pick LIST K: whether K is in LIST ("7,9,41-46").
  in_pick() {
    local item
    for item in ${1//,/ }; do
      if [[ "$item" == *-* ]]; then [ "$2" -ge "${item%-*}" ] && [ "$2" -le "${item#*-}" ] && return 0
      elif [ "$2" -eq "$item" ]; then return 0; fi
    done
    return 1
  }
  if [ -n "${LIST:-}" ]; then
    while read -r line; do
      line=${line%%#*}
      line=$(echo "$line" | tr -d '[:space:]')
      [ -z "$line" ] && continue
      if [ -f "$kb/$line" ]; then files+=("$kb/$line")
      else echo "kernelbench_bench_gpu: $LIST names $line, which is not in $kb" | tee -a "$log"; exit 2; fi
    done <"$LIST"
  fi
  for level in 1 2 3; do
    [ -n "${LIST:-}" ] && break
    case $level in
      1) n=${L1:-40} pick=${PICK1-} ;;
      2) n=${L2:-30} pick=${PICK2-} ;;
      3) n=${L3:-0} pick=${PICK3-} ;;
    esac
    for f in "$kb/level$level"/*.py; do
      k=$(basename "$f"); k=${k%%_*}
      [[ "$k" =~ ^[0-9]+$ ]] || continue
      if [ -n "${PICK1+x}${PICK2+x}${PICK3+x}" ]; then
        [ -n "$pick" ] && in_pick "$pick" "$k" && files+=("$f")
      elif [ "$k" -le "$n" ]; then
        files+=("$f")
      fi
    done
  done
  if [ -n "${DONE_IN:-}" ]; then
    # The rows' problems as "levelN/PROBLEM.py", the file names the bench reads.
    done_text=$("$PYTHON" - "${DONE_IN%%:*}" "${DONE_IN#*:}" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["run"] == sys.argv[2]:
        print("level%s/%s.py" % (r["level"], r["problem"]))
PY
    ) || { echo "kernelbench_bench_gpu: DONE_IN=$DONE_IN: could not read ${DONE_IN%%:*}" | tee -a "$log"; exit 2; }
    left_files=()
    for f in "${files[@]}"; do
      rel="$(basename "$(dirname "$f")")/$(basename "$f")"
      grep -qxF "$rel" <<<"$done_text" || left_files+=("$f")
    done
    echo "kernelbench_bench_gpu: DONE_IN: $(( ${#files[@]} - ${#left_files[@]} )) of ${#files[@]} problems have rows of run '${DONE_IN#*:}' and are left out" | tee -a "$log"
    files=("${left_files[@]}")
    if [ ${#files[@]} -eq 0 ]; then
      echo "kernelbench_bench_gpu: DONE_IN: every problem picked has its row; nothing to run" | tee -a "$log"
      exit 0
    fi
  fi
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$ngpu" -ge 1 ] || ngpu=1
  # Two repairs: a seed that fails gets the plainest parameters, then, if they fail too,
  # its reductions as ATen library steps (docs/rules-coder.md, library_reductions).
  cat >"$dir.yaml" <<YAML
name: $name
gpus: {local: all, review_timeout_s: 300}
budgets: {seeds: ${SEEDS:-2}, rounds: ${ROUNDS:-1}, repair_attempts: 2, tasks_in_flight: $(( ${IN_FLIGHT:-4} * ngpu ))}
review: {trials: ${TRIALS:-3}}
YAML
  echo "kernelbench_bench_gpu: ${#files[@]} problems, $ngpu GPU(s), started $(date -u +%T)" | tee -a "$log"
  # Its own session and process group: it outlives this call, and stopping the group
  # stops its workers and Python children too. Its exit status goes to NAME.rc.
  rm -f "$BUILD/$name.rc"
  setsid bash -c '"$BUILD/bin/kernelskill" bench "${@:2}"; echo $? > "$BUILD/$1.rc"' bench "$name" "${files[@]}" \
    --out "$dir" --config "$dir.yaml" --ablation "${ABLATION:-full}" --python "$PYTHON" --jobs "${JOBS:-14}" \
    --reps "${REPS:-30}" --trials "${SBS_TRIALS:-3}" ${COMMIT:+--commit "$COMMIT"} >>"$log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$pidfile"
fi
while kill -0 "$pid" 2>/dev/null && [ "$(left)" -gt 25 ]; do sleep 5; done
if kill -0 "$pid" 2>/dev/null && [ -n "${STOP:-}" ]; then
  echo "kernelbench_bench_gpu: STOP: stopping the bench" | tee -a "$log"
  kill -TERM -- "-$pid" 2>/dev/null; sleep 8; kill -KILL -- "-$pid" 2>/dev/null
fi
# The device returns at most 8 files: the pictures, rounds.json and the measurement's
# lines travel in the tarball.
cp "$log" "$out/bench.log"
cp "$dir"/summary.md "$dir"/summary.json "$dir"/speedup_by_round.csv "$dir"/results-*.csv "$out/" 2>/dev/null
tar -czf "$out/$name.tgz" --exclude='*.pt' --exclude="$name/measure/build" --exclude="$name/measure/inductor" \
  --exclude="$name/variants/*/memory/scratch" -C "$BUILD" "$name" 2>/dev/null
echo "kernelbench_bench_gpu: state in $name.tgz ($(du -k "$out/$name.tgz" | cut -f1) KiB; the device returns files up to 16 MiB)"
grep -E "^kernelskill bench: \[(import|run [a-z-]+|export [a-z-]+|measure|prepare)\] (complete|done|skipped|[0-9]+ of|warming|measuring)" "$log" | tail -10
grep -cE "^\[(warm|build)\]" "$log" | sed 's/^/kernelbench_bench_gpu: warm-up and build lines so far: /'
if kill -0 "$pid" 2>/dev/null; then
  echo "kernelbench_bench_gpu: still running after $(( $(date +%s) - t0 )) s: call again within 30 s to follow it"
else
  grep -A4 "^kernelskill bench: /" "$log" | tail -6
  echo "kernelbench_bench_gpu: finished, exit $(cat "$BUILD/$name.rc" 2>/dev/null || echo unknown)"
fi
