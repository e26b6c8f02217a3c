#!/usr/bin/env bash
# Where each KernelBench problem stands before any GPU work: `kernelskill import
# kernelbench`, then `kernelskill lower` (rules coder) of every imported task at its
# published size, one problem at a time, each under a wall-clock limit. No GPU needed
# (the graph export probes on meta tensors, else on the CPU). One CSV row per problem:
# imported, lowered, the lowering's seconds and peak memory, and the first line of why
# it failed, in docs/results' format (the CPU lowering table of docs/benchmarks.md).
#
#   bench/run.sh kb-lower KERNELBENCH_DIR/level3            (builds kernelskill, kernelskill-gpu)
#   BUILD=build OUT=DIR bench/kernelbench/lower_status.sh KERNELBENCH_DIR/level3 [PROBLEM.py ...]
#     the arguments: problem files, or directories of them (as `kernelskill import`)
#   SEEDS    seeds a lowering writes (default 2)
#   TIMEOUT  seconds one lowering may take (default 1200), then it is a failed row
#   JOBS     problems imported at once (default 1: a 2-core machine)
#   WORK     where tasks and lowerings go (default BUILD/kb-lower, emptied first)
#   IMPORTED an earlier run's WORK/tasks: lower those tasks again, without importing
#            (the arguments are then only for the record; WORK/lowered is emptied)
#   RUN      the run's name in the CSV (default "DATE lowering on the CPU")
#   DEVICE   the CSV's device column (default "CPU (Ncores)")
#   PYTHON   a Python with PyTorch (and einops for the Mamba2 problems)
# OUT gets lower-status.csv (append its rows to docs/results/kb-lower.csv, then
# python3 scripts/results_page.py), import-report.json, import.log and per problem
# lowered/NAME/{lower.log,seed-K.cu,seed-K.yaml} under WORK.
set -uo pipefail
[ $# -gt 0 ] || { sed -n 2,22p "$0" | sed 's/^# \{0,1\}//'; exit 2; }
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
args=("$@")  # relative paths: from the repository root, as every runner takes them
work=${WORK:-$BUILD/kb-lower}
seeds=${SEEDS:-2}
limit=${TIMEOUT:-1200}
jobs=${JOBS:-1}
bench_stamp lower_status "lowering on the CPU"
if [ -n "${IMPORTED:-}" ]; then
  # Lower what an earlier run imported (its WORK/tasks), again: the import is not repeated.
  [ -f "$IMPORTED/import-report.json" ] || { echo "lower_status: IMPORTED=$IMPORTED has no import-report.json" >&2; exit 2; }
  rm -rf "$work/lowered" && mkdir -p "$work/lowered"
  cp "$IMPORTED/import-report.json" "$OUT/"
  report=$IMPORTED/import-report.json
else
  rm -rf "$work" && mkdir -p "$work/lowered"
  bench_log "importing ${args[*]} into $work/tasks ($jobs at once)"
  "$BUILD/bin/kernelskill" import kernelbench "${args[@]}" --out "$work/tasks" \
    --python "$PYTHON" --jobs "$jobs" 2>"$OUT/import.log"
  cp "$work/tasks/import-report.json" "$OUT/" || { echo "lower_status: the import wrote no report (see $OUT/import.log)" >&2; exit 1; }
  report=$work/tasks/import-report.json
fi

bench_import_rows "$report" >"$work/problems.txt"

csv="$OUT/lower-status.csv"
echo "run,date,commit,device,level,problem,imported,lowered,seconds,peak_mib,reason" >"$csv"
while IFS=$'\x1f' read -r file task err; do
  name=$(basename "$file" .py)
  level=$(echo "$file" | sed -n 's#.*/level\([0-9]*\)/.*#\1#p')
  if [ -z "$task" ]; then
    bench_log "$name: not imported: ${err:0:200}"
    echo "$bench_prefix,$level,$name,no,no,,,$(bench_csv_quote "import: ${err:0:300}")" >>"$csv"
    continue
  fi
  dir="$work/lowered/$name"
  mkdir -p "$dir"
  # GNU time: wall seconds and the peak resident set of the lowering and of its graph
  # export (wait4's usage covers the descendants it waited for).
  timeout --kill-after=10 "$limit" /usr/bin/time -f "KS-TIME %e %M" -o "$dir/time.txt" \
    "$BUILD/bin/kernelskill" lower "$task" --out "$dir" --seeds "$seeds" >"$dir/lower.log" 2>&1
  rc=$?
  secs=$limit mib=""
  if read -r _ s kib < <(grep '^KS-TIME ' "$dir/time.txt" 2>/dev/null); then
    secs=$s mib=$(( kib / 1024 ))
  fi
  if [ $rc -eq 0 ]; then
    bench_log "$name: lowered in $secs s (peak $mib MiB)"
    echo "$bench_prefix,$level,$name,yes,yes,$secs,$mib," >>"$csv"
  else
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      why="not finished in $limit s"
    else
      why=$(grep -m1 -E "kernelskill: |does not resolve" "$dir/lower.log" || tail -1 "$dir/lower.log")
      why=$(echo "$why" | tr -s ' \t' ' ' | cut -c1-300)
    fi
    bench_log "$name: not lowered ($secs s): $why"
    echo "$bench_prefix,$level,$name,yes,no,$secs,$mib,$(bench_csv_quote "$why")" >>"$csv"
  fi
done <"$work/problems.txt"
n=$(($(wc -l <"$csv") - 1))
ok=$(grep -c ',yes,yes,' "$csv")
bench_log "lowered $ok of $n problems; rows in $csv"
