#!/usr/bin/env bash
# Imports KernelBench's own problem files (levels 1-3, fetched: github
# ScalingIntelligence/KernelBench, not vendored) with `kernelskill import kernelbench`,
# and prints how many of each level imported, how (input programs, tracing, weights),
# what the failures were, and how long it took. The numbers go to docs/kernelbench.md.
#
#   bench/kernelbench_import.sh KERNELBENCH_DIR [BUILD_DIR] [OUT_DIR]
#     KERNELBENCH_DIR: the repository's KernelBench/ folder (level1/, level2/, level3/)
#   PYTHON (default python3) and JOBS (default: half the cores) in the environment.
set -uo pipefail
kb=${1:?usage: bench/kernelbench_import.sh KERNELBENCH_DIR [BUILD_DIR] [OUT_DIR]}
build=${2:-build}
out=${3:-kernelbench-import}
jobs=${JOBS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
rm -rf "$out" && mkdir -p "$out"
t0=$(date +%s)
levels=()
for l in level1 level2 level3; do [ -d "$kb/$l" ] && levels+=("$kb/$l"); done
"$build/bin/kernelskill" import kernelbench "${levels[@]}" --out "$out/tasks" \
  --python "${PYTHON:-python3}" --jobs "$jobs" 2>"$out/import.log"
t1=$(date +%s)
python3 - "$out/tasks/import-report.json" "$((t1 - t0))" "$jobs" <<'PY'
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
