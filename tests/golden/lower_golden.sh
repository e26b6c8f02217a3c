#!/usr/bin/env bash
# Golden snapshots of what `kernelskill lower` writes (every seed's .cu and .yaml, and
# the one-line verdict per seed) for every task in examples/tasks, bench/suites/ops and
# tests/golden/tasks (tasks kept only to reach code paths the others do not: each
# says which at its top).
# Code that moves or is refactored must leave these byte-identical.
#
#   tests/golden/lower_golden.sh check   BUILD_DIR   compare (ctest runs this)
#   tests/golden/lower_golden.sh refresh BUILD_DIR   rewrite tests/golden/lower/
#
# Refresh only for a change that is meant to change the generated code, and say so in
# the commit message; `git diff tests/golden/lower` then shows exactly what changed.
# The features golden reads these seeds: refresh it after them
# (KS_FEATURES_GOLDEN_REFRESH=1 BUILD_DIR/bin/features_golden_test).
set -euo pipefail
mode=${1:?usage: lower_golden.sh check|refresh BUILD_DIR}
build=${2:?usage: lower_golden.sh check|refresh BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
golden="$root/tests/golden/lower"
seeds=4
jobs=${KS_GOLDEN_JOBS:-$(nproc)}

case "$mode" in check|refresh) ;; *) echo "lower_golden.sh: unknown mode '$mode' (check or refresh)" >&2; exit 2;; esac
[ -x "$build/bin/kernelskill" ] || { echo "lower_golden.sh: no $build/bin/kernelskill (build first)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ks-golden.XXXXXX")
trap 'rm -rf "$work"' EXIT

# One task: lower it into $work/<task>/, with the verdicts (paths made relative) in
# verdicts.txt and the exit status last.
lower_one() {
  local task=$1 name out
  name=$(basename "$task" .yaml)
  out="$work/$name"
  mkdir -p "$out"
  local rc=0
  (cd "$root" && "$build/bin/kernelskill" lower "${task#$root/}" --out "$out" --seeds $seeds) \
    >"$out/verdicts.raw" 2>&1 || rc=$?
  sed "s#$out/##g" "$out/verdicts.raw" >"$out/verdicts.txt"
  rm -f "$out/verdicts.raw"
  echo "exit $rc" >>"$out/verdicts.txt"
}
export -f lower_one
export root build work seeds

tasks=("$root"/examples/tasks/*.yaml "$root"/bench/suites/ops/*.yaml "$root"/tests/golden/tasks/*.yaml)
printf '%s\n' "${tasks[@]}" | xargs -P "$jobs" -I{} bash -c 'lower_one "$@"' _ {}

if [ "$mode" = refresh ]; then
  rm -rf "$golden"
  mkdir -p "$golden"
  cp -r "$work"/. "$golden"/
  echo "lower_golden.sh: wrote ${#tasks[@]} tasks to tests/golden/lower"
  exit 0
fi

if diff -r "$golden" "$work" >"$work.diff" 2>&1; then
  echo "lower_golden.sh: ${#tasks[@]} tasks, every seed byte-identical to tests/golden/lower"
  rm -f "$work.diff"
  exit 0
fi
echo "lower_golden.sh: what kernelskill lower writes differs from tests/golden/lower:" >&2
head -c 20000 "$work.diff" >&2
rm -f "$work.diff"
echo >&2
echo "If the change is meant to change generated code: tests/golden/lower_golden.sh refresh $build" >&2
exit 1
