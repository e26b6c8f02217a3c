#!/usr/bin/env bash
# docs/benchmarks.md's tables are what scripts/results_page.py writes from
# docs/results/*.csv, so the page and the data cannot drift apart. The check is shown to
# fail where it should: a page with one number changed, and a CSV row with a bad value
# (named by file, line and column).
#
#   tests/results_page_test.sh        (ctest runs it as results_page)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
script="$root/scripts/results_page.py"
python=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ks-results-page.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "results_page_test: $*"; exit 1; }

"$python" "$script" --check || fail "docs/benchmarks.md is not what docs/results/ gives (python3 scripts/results_page.py rewrites it)"

# A number changed in a generated table: the check must fail.
cp "$root/docs/benchmarks.md" "$tmp/page.md"
line=$(grep -n '^| .*[0-9]\.[0-9]' "$tmp/page.md" | head -1 | cut -d: -f1)
[ -n "$line" ] || fail "the page has no table row with a number"
sed -i "${line}s/\([0-9]\)\.\([0-9]\)/\1.9\2/" "$tmp/page.md"
if "$python" "$script" --check --page "$tmp/page.md" >"$tmp/out" 2>&1; then
  fail "the check passed a page whose table was edited by hand"
fi

# A bad value in a CSV row: named by file, line and column.
cp -r "$root/docs/results" "$tmp/results"
csv=$(ls "$tmp/results"/*.csv | head -1)
n=$(wc -l <"$csv")
sed -i "2s/^\([^,]*\),\([^,]*\),/\1,2026-13,/" "$csv"
if "$python" "$script" --check --results "$tmp/results" >"$tmp/out" 2>&1; then
  fail "the check passed a CSV row with the date 2026-13"
fi
grep -q "$(basename "$csv"):2: column date" "$tmp/out" || { cat "$tmp/out"; fail "the error does not name the file, line and column"; }
[ "$(wc -l <"$csv")" = "$n" ] || fail "the test's own edit changed the row count"
echo "results_page_test: the page matches the data, and the check catches an edited table and a bad row"
