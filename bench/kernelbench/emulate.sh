#!/usr/bin/env bash
# KernelBench's problems checked on the CPU before any GPU sees them: the problems at
# small sizes (bench/kernelbench/resize.py --small: a sixteenth of each size, odd),
# imported, and each task's rules-coder seeds run on the CPU against its reference
# (ks-emulate: kernels through the test emulator, library steps through ATen). A wrong
# kernel (an index, a fused epilogue, a padded row) shows here, where a GPU call would
# have spent minutes on it. The GPU review stays the judge (TF32 products, timing).
#
#   bench/run.sh kb-emulate KERNELBENCH_DIR [LEVEL/PATTERN ...]   (builds kernelskill, ks-emulate)
#   BUILD=build OUT=DIR bench/kernelbench/emulate.sh KERNELBENCH_DIR [LEVEL/PATTERN ...]
#     KERNELBENCH_DIR: KernelBench's KernelBench/ folder; the patterns pick problems
#     of the resized copy (e.g. 'level2/[3-9]*' 'level1/5[4-9]_*'); default: every one
#   SEEDS    seeds a task (default 2)
#   TIMEOUT  seconds one task's seeds may take (default 600), then it is a failed row
#   JOBS     problems imported at once (default 1)
#   WORK     where the resized problems and tasks go (default BUILD/kb-emulate, emptied)
#   PYTHON   a Python with PyTorch (and einops for the Mamba2 problems)
#   RUN      the run's name in the CSV (default "DATE CPU emulation at small sizes")
#   DEVICE   the CSV's device column (default "CPU (Ncores)")
# OUT gets emulate.csv in docs/results' format (run, date, commit, device, level, problem,
# imported, seeds, correct, max_abs_error, seconds, reason: the import's error, the
# lowering's, or the first wrong seed's, after "unstable at these sizes: ..." where the
# reference on all threads and on one differ past the tolerance; append its rows to
# docs/results/kb-emulate.csv, then python3 scripts/results_page.py), emulate.jsonl
# (ks-emulate's lines), import.log and SIZES.md (what resize.py changed).
set -uo pipefail
[ $# -gt 0 ] || { sed -n 2,25p "$0" | sed 's/^# \{0,1\}//'; exit 2; }
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill ks-emulate || exit 2
kb=$1
shift
work=${WORK:-$BUILD/kb-emulate}
seeds=${SEEDS:-2}
limit=${TIMEOUT:-600}
jobs=${JOBS:-1}
bench_stamp emulate "CPU emulation at small sizes"
rm -rf "$work" && mkdir -p "$work"
"$PYTHON" bench/kernelbench/resize.py --small "$kb" "$work/small" >/dev/null || exit 1
cp "$work/small/SIZES.md" "$OUT/"
picked=()
if [ $# -eq 0 ]; then
  for level in "$work"/small/level[123]; do [ -d "$level" ] && picked+=("$level"); done
else
  for p in "$@"; do
    # shellcheck disable=SC2206  # the pattern is meant to expand
    files=("$work"/small/$p)
    [ -e "${files[0]}" ] || { echo "emulate: no problem matches $p under $work/small" >&2; exit 2; }
    picked+=("${files[@]}")
  done
fi
bench_log "importing ${#picked[@]} problem files or folders at small sizes into $work/tasks"
"$BUILD/bin/kernelskill" import kernelbench "${picked[@]}" --out "$work/tasks" --python "$PYTHON" \
  --jobs "$jobs" 2>"$OUT/import.log"
[ -f "$work/tasks/import-report.json" ] || { echo "emulate: the import wrote no report (see $OUT/import.log)" >&2; exit 1; }

bench_import_rows "$work/tasks/import-report.json" >"$work/problems.txt"

csv="$OUT/emulate.csv"
jsonl="$OUT/emulate.jsonl"
echo "run,date,commit,device,level,problem,imported,seeds,correct,max_abs_error,seconds,reason" >"$csv"
: >"$jsonl"
while IFS=$'\x1f' read -r file task err; do
  name=$(basename "$file" .py)
  level=$(echo "$file" | sed -n 's#.*/level\([0-9]*\)/.*#\1#p')
  if [ -z "$task" ]; then
    bench_log "$name: not imported: ${err:0:200}"
    echo "$bench_prefix,$level,$name,no,0,0,,,$(bench_csv_quote "import: ${err:0:300}")" >>"$csv"
    continue
  fi
  t0=$(date +%s)
  line=$(timeout --kill-after=10 "$limit" "$BUILD/bin/ks-emulate" --seeds "$seeds" --work "$work/emulated" "$task" \
    2>"$work/$name.err" | tail -1)
  secs=$(( $(date +%s) - t0 ))
  [ -n "$line" ] || line="{\"task\": \"$name\", \"seeds\": 0, \"correct\": 0, \"error\": \"ks-emulate ended without a result after $secs s: $(tail -1 "$work/$name.err" | tr -d '"\\' | cut -c1-200)\"}"
  echo "$line" >>"$jsonl"
  "$PYTHON" - "$line" "$bench_prefix,$level,$name" "$secs" >>"$csv" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
why = " ".join((r.get("error") or r.get("note") or "").split())[:300].replace('"', '""')
err = r.get("max_abs_error")
print(f'{sys.argv[2]},yes,{r["seeds"]},{r["correct"]},{"" if err is None else f"{err:.3g}"},'
      f'{sys.argv[3]},"{why}"')
PY
  bench_log "$name: $(tail -1 "$csv" | cut -d, -f8-11)"
done <"$work/problems.txt"
n=$(($(wc -l <"$csv") - 1))
all=$("$PYTHON" -c 'import csv, sys; print(sum(1 for r in csv.DictReader(open(sys.argv[1])) if r["seeds"] != "0" and r["seeds"] == r["correct"]))' "$csv")
bench_log "every seed correct on $all of $n problems; rows in $csv"
