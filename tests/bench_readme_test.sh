#!/usr/bin/env bash
# bench/README.md lists every file in bench/: each row of its file table starts with the
# file's path relative to bench/ in backticks (`ops/side_by_side.sh`), or a pattern for
# a folder of data (`suites/ops/*.yaml`). Fails naming each file no row lists, and each
# row that names no file.
#
#   tests/bench_readme_test.sh [BENCH_DIR]    (default: the source tree's bench/; ctest
#                                              runs it as bench_readme)
# Also checks itself: a copy of bench/ with one more file, or one file fewer, must fail
# and name it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# check DIR: 0 when DIR/README.md lists exactly the files in DIR.
check() {
  local dir=$1 readme="$1/README.md" entries=() files=() f e hit rc=0
  [ -f "$readme" ] || { echo "bench_readme: $readme does not exist"; return 1; }
  # The first backticked word of each table row that starts with one.
  mapfile -t entries < <(grep -oE '^\| `[^`]+`' "$readme" | sed -E 's/^\| `([^`]+)`$/\1/')
  [ ${#entries[@]} -gt 0 ] || { echo "bench_readme: $readme has no file table (rows starting with | \`path\`)"; return 1; }
  mapfile -t files < <(cd "$dir" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | sed 's#^\./##' | LC_ALL=C sort)
  for f in "${files[@]}"; do
    hit=0
    for e in "${entries[@]}"; do
      # shellcheck disable=SC2053
      if [ "$f" = "$e" ] || { [[ "$e" == *"*"* ]] && [[ "$f" == $e ]]; }; then hit=1; break; fi
    done
    [ $hit = 1 ] || { echo "bench_readme: bench/$f is not listed in bench/README.md (add a row: | \`$f\` | what it measures | the command |)"; rc=1; }
  done
  for e in "${entries[@]}"; do
    hit=0
    for f in "${files[@]}"; do
      # shellcheck disable=SC2053
      if [ "$f" = "$e" ] || { [[ "$e" == *"*"* ]] && [[ "$f" == $e ]]; }; then hit=1; break; fi
    done
    [ $hit = 1 ] || { echo "bench_readme: bench/README.md lists \`$e\`, which matches no file in bench/"; rc=1; }
  done
  return $rc
}

dir=${1:-$root/bench}
if [ $# -eq 0 ]; then
  # The check itself must fail where it should: one unlisted file in a copy.
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/ks-bench-readme.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$dir" "$tmp/bench"
  mkdir -p "$tmp/bench/ops"
  echo "#!/bin/sh" >"$tmp/bench/ops/unlisted_probe.sh"
  if out=$(check "$tmp/bench"); then
    echo "bench_readme: the check passed a bench/ with an unlisted file"
    exit 1
  fi
  if ! grep -q "bench/ops/unlisted_probe.sh is not listed" <<<"$out"; then
    echo "bench_readme: the check failed without naming the unlisted file:"
    echo "$out"
    exit 1
  fi
  rm "$tmp/bench/ops/unlisted_probe.sh" "$tmp/bench/run.sh"
  if out=$(check "$tmp/bench") || ! grep -q 'lists `run.sh`, which matches no file' <<<"$out"; then
    echo "bench_readme: the check did not name a listed file that is gone:"
    echo "$out"
    exit 1
  fi
fi
if check "$dir"; then
  echo "bench_readme: every file in bench/ is listed in bench/README.md"
else
  exit 1
fi
