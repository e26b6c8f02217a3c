#!/usr/bin/env bash
# Imports KernelBench's own problem files (levels 1-3, fetched: github
# ScalingIntelligence/KernelBench, not vendored) with `kernelskill import kernelbench`,
# and prints how many of each level imported, how (input programs, tracing, weights),
# what the failures were, and how long it took. The numbers go to docs/kernelbench.md.
#
#   bench/run.sh kb-import KERNELBENCH_DIR       (builds kernelskill and kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/kernelbench/import.sh KERNELBENCH_DIR
#     KERNELBENCH_DIR: the repository's KernelBench/ folder (level1/, level2/, level3/)
#   JOBS (default: half the cores); WORK (default BUILD/kernelbench-import, emptied
#   first) gets the tasks. OUT gets import.log, import-report.json and summary.md.
set -uo pipefail
kb=${1:?usage: bench/kernelbench/import.sh KERNELBENCH_DIR}
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill || exit 2
work=${WORK:-$BUILD/kernelbench-import}
jobs=${JOBS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
rm -rf "$work" && mkdir -p "$work"
t0=$(date +%s)
levels=()
for l in level1 level2 level3; do [ -d "$kb/$l" ] && levels+=("$kb/$l"); done
"$BUILD/bin/kernelskill" import kernelbench "${levels[@]}" --out "$work/tasks" \
  --python "$PYTHON" --jobs "$jobs" 2>"$OUT/import.log"
t1=$(date +%s)
cp "$work/tasks/import-report.json" "$OUT/" 2>/dev/null
"$PYTHON" - "$work/tasks/import-report.json" "$((t1 - t0))" "$jobs" <<'PY' | tee "$OUT/summary.md"
import collections, json, sys
rows = json.load(open(sys.argv[1]))
by = collections.defaultdict(list)
for r in rows:
    level = next((p for p in r["file"].split("/") if p.startswith("level")), "other")
    by[level].append(r)
print(f"imported {sum(1 for r in rows if not r['error'])} of {len(rows)} problems in {sys.argv[2]} s ({sys.argv[3]} at once)")
print("| level | problems | imported | with weights | input program | traced | failed |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for level in sorted(by):
    rs = by[level]
    ok = [r for r in rs if not r["error"]]
    print(f"| {level} | {len(rs)} | {len(ok)} | {sum(1 for r in ok if r['parameters'])} | "
          f"{sum(1 for r in ok if r['input_program'])} | "
          f"{sum(1 for r in ok if any('traced' in n for n in r['notes']))} | {len(rs) - len(ok)} |")
for r in rows:
    if r["error"]:
        print("FAILED", r["error"][:300])
for r in rows:
    for n in r["notes"]:
        print("NOTE", r["file"].split("KernelBench/")[-1], n[:200])
PY
