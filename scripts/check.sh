#!/usr/bin/env bash
# The checks a change passes besides its tests, in one go (CONTRIBUTING.md):
#
#   scripts/check.sh [BUILD_DIR]        (default build; built with layering_test and kernelskill)
#
# 1. format: the lines changed since BASE are as .clang-format says (git clang-format
#    --diff: only what a change touches; the whole tree was formatted once, in the
#    commit .git-blame-ignore-revs names). BASE: $KS_CHECK_BASE, else the merge base with main, else HEAD~1.
#    KS_FORMAT=warn reports without failing.
# 2. layering and size: no upward include or folder cycle, no file over 1000 lines or
#    function over 150 but those in tests/size_allowlist.txt (layering_test).
# 3. golden lowering: `kernelskill lower` writes what tests/golden/lower holds.
# 4. bench/ and the results page: every bench/ file listed in bench/README.md, and
#    docs/benchmarks.md what scripts/results_page.py writes from docs/results/.
# Each step says ok or what is wrong; the exit status is the number of steps that failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
cd "$root" || exit 1
failed=0
step() {  # NAME COMMAND...: runs it quietly, shows its output only when it fails
  local name=$1 log
  shift
  log=$(mktemp)
  if "$@" >"$log" 2>&1; then
    echo "check: $name ok"
  else
    echo "check: $name FAILED:"
    tail -40 "$log" | sed 's/^/  /'
    failed=$((failed + 1))
  fi
  rm -f "$log"
}

format() {
  local base=${KS_CHECK_BASE:-}
  [ -n "$base" ] || base=$(git merge-base HEAD main 2>/dev/null || true)
  [ -n "$base" ] && [ "$base" != "$(git rev-parse HEAD)" ] || base=$(git rev-parse HEAD~1)
  command -v git-clang-format >/dev/null || { echo "git-clang-format is missing (Debian: clang-format)"; return 1; }
  local diff
  diff=$(git clang-format --diff --extensions cpp,hpp,h,cu,cuh "$base" -- 2>&1)
  case "$diff" in
    ""|*"no modified files to format"*|*"clang-format did not modify any files"*) return 0 ;;
  esac
  echo "lines changed since $(git rev-parse --short "$base") are not as .clang-format says; to fix them:"
  echo "  git clang-format $(git rev-parse --short "$base")"
  echo "$diff" | head -30
  [ "${KS_FORMAT:-check}" = warn ]
}

step format format
if [ -x "$build/bin/layering_test" ]; then
  step "layering and size" "$build/bin/layering_test"
else
  echo "check: layering and size FAILED: no $build/bin/layering_test (build it)"; failed=$((failed + 1))
fi
step "golden lowering" bash tests/golden/lower_golden.sh check "$build"
step "bench/README.md" bash tests/bench_readme_test.sh
step "results page" bash tests/results_page_test.sh
exit "$failed"
