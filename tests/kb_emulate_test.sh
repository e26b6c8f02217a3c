#!/usr/bin/env bash
# bench/kernelbench/emulate.sh end to end on KernelBench-format problems of its own: a
# ReLU and a Gemm + epilogue at small sizes import, their seeds run on the CPU and
# match the reference (rows in docs/results' format, which results_page.py accepts);
# a problem that draws dropout in forward is a row saying it was not imported; one whose
# reference differs between one thread and two is a row saying it is unstable.
#   tests/kb_emulate_test.sh BUILD_DIR      (ctest runs it as kb_emulate)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?the build directory}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ks-kb-emulate.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "kb_emulate: $*"; exit 1; }
py=""
for p in ${KS_PYTHON:-} /usr/bin/python3 python3; do "$p" -c "import torch" 2>/dev/null && { py=$p; break; }; done
[ -n "$py" ] || fail "no Python with torch (scripts/setup.sh installs python3-torch)"
mkdir -p "$tmp/kb/level1" "$tmp/kb/level2"
sed 's/^dim = 384$/dim = 768/' "$root/tests/data/kernelbench/good/relu.py" > "$tmp/kb/level1/19_ReLU.py"
cp "$root/tests/data/kernelbench/good/gemm_relu_divide.py" "$tmp/kb/level2/63_Gemm_ReLU_Divide.py"
cp "$root/tests/data/kernelbench/bad/dropout.py" "$tmp/kb/level2/66_Dropout.py"
cp "$root/tests/data/kernelbench/unstable/channels_last_batch_norm.py" "$tmp/kb/level2/90_ChannelsLastBatchNorm.py"
# ks-emulate compares the reference on all threads with one thread: it needs two.
threads=$(nproc)
BUILD=$build OUT=$tmp/out PYTHON=$py WORK=$tmp/work SEEDS=2 RUN="test run" \
  bash "$root/bench/kernelbench/emulate.sh" "$tmp/kb" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "emulate.sh failed"; }
csv=$tmp/out/emulate.csv
[ -f "$csv" ] || { cat "$tmp/log"; fail "no emulate.csv"; }
"$py" - "$csv" "$threads" <<'PY' || { cat "$csv"; fail "the rows are not what the problems give"; }
import csv, sys
rows = {r["problem"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert set(rows) == {"19_ReLU", "63_Gemm_ReLU_Divide", "66_Dropout", "90_ChannelsLastBatchNorm"}, rows.keys()
for name in ("19_ReLU", "63_Gemm_ReLU_Divide"):
    r = rows[name]
    assert r["imported"] == "yes" and r["seeds"] == "2" and r["correct"] == "2", r
    assert r["run"] == "test run", r
assert rows["19_ReLU"]["level"] == "1" and rows["63_Gemm_ReLU_Divide"]["level"] == "2"
d = rows["66_Dropout"]
assert d["imported"] == "no" and "dropout" in d["reason"], d
u = rows["90_ChannelsLastBatchNorm"]
assert u["imported"] == "yes" and u["seeds"] == "2", u
if int(sys.argv[2]) > 1:
    assert u["reason"].startswith("unstable at these sizes: the reference differs from itself by"), u
else:
    print("kb_emulate: one CPU: the reference's self-check needs two threads and was not run")
PY
grep -q "dim 768->47" "$tmp/out/SIZES.md" || { cat "$tmp/out/SIZES.md"; fail "SIZES.md does not list the small sizes"; }
grep -q "every seed correct on 2 of 4 problems" "$tmp/log" || { cat "$tmp/log"; fail "the log's last line does not count them"; }
# The rows are docs/results' format: results_page.py renders them.
mkdir -p "$tmp/results"
cp "$csv" "$tmp/results/kb-emulate.csv"
printf '# page\n\n<!-- results kb-emulate -->\n<!-- /results -->\n' >"$tmp/page.md"
"$py" "$root/scripts/results_page.py" --page "$tmp/page.md" --results "$tmp/results" >/dev/null 2>"$tmp/err" ||
  { cat "$tmp/err"; fail "results_page.py refused the rows"; }
summary="4 problems, 3 imported, every seed correct on 2"
[ "$threads" -gt 1 ] && summary="$summary, 1 with a reference unstable at these sizes"
grep -q "$summary" "$tmp/page.md" || { cat "$tmp/page.md"; fail "the page's summary is not: $summary"; }
echo "kb_emulate: passed"
