#!/usr/bin/env bash
# On the GPU machine: runs exactly the tests labelled `gpu` (ctest -L gpu) and fails if
# any of them fails, is skipped (a driver check that never succeeds, a GPU that is not
# seen), or if there are none (a label lost). Where there is no GPU, those tests are
# reported as skipped instead (tests/support/gpu_skip.hpp); this script is for the GPU machine.
#
#   scripts/gpu-tests.sh [BUILD_DIR]     (default: build)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(cd "$build" && ctest -L '^gpu$' --output-on-failure) 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# ctest 3 says "N% tests passed, F tests failed out of T", ctest 4 "100% tests passed out of T".
total=$(grep -oE 'tests (passed|failed) out of [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
skipped=$(grep -c '(Skipped)$' "$log")
if [ -z "$total" ] || [ "$total" -eq 0 ]; then
  echo "gpu-tests: no test is labelled gpu: a label was lost" >&2
  exit 1
fi
if [ "$skipped" -gt 0 ]; then
  echo "gpu-tests: $skipped of $total gpu tests were skipped on a machine that should run them:" >&2
  grep '(Skipped)$' "$log" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  echo "gpu-tests: ctest -L gpu failed (exit $rc)" >&2
  exit "$rc"
fi
echo "gpu-tests: $total gpu tests ran and passed, none skipped"
