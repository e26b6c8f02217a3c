#!/usr/bin/env bash
# Sets everything up (Debian packages, configure, build) and runs the whole test suite
# with ctest. GPU tests are reported as skipped where there is no GPU, and the last
# line counts passed, failed and skipped tests. Extra arguments go to ctest (e.g.
# scripts/test.sh -R protocol). KS_WERROR=ON builds with warnings as errors, as CI
# does (.ci/run); scripts/sanitize.sh runs the CPU suites under the sanitizers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${BUILD_DIR:-build}
cd "$root/$build"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# ctest counts a skipped test among those that did not fail; say it in one line.
# ctest 3 says "N% tests passed, F tests failed out of T", ctest 4 "100% tests passed out of T".
total=$(grep -oE 'tests (passed|failed) out of [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
failed=$(grep -oE '[0-9]+ tests failed out of' "$log" | grep -oE '^[0-9]+' | tail -1)
skipped=$(grep -c '(Skipped)$' "$log" || true)
if [ -n "$total" ]; then
  echo "$((total - ${failed:-0} - skipped)) passed, ${failed:-0} failed, $skipped skipped"
fi
exit "$rc"
