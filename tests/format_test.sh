#!/usr/bin/env bash
# Every C++ source of the tree (.cpp, .hpp; not the .cu/.cuh text that the golden
# snapshots and the embedded device helpers compare byte for byte, not tests/data) is as
# .clang-format says. The tree was formatted once with clang-format 14 (Debian 12's; the
# commit is in .git-blame-ignore-revs); another major version formats some constructs
# differently, so there the test says so and skips (exit 77) instead of failing on
# whitespace it did not write. Fails naming each file that is not formatted, with the
# command that fixes it.
#
#   tests/format_test.sh [SOURCE_DIR]     (ctest runs it as format)
# Also checks itself: a copy of one source with its indentation broken must fail.
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
want=14
command -v clang-format >/dev/null || { echo "format: clang-format is missing (Debian: clang-format): skipped"; exit 77; }
have=$(clang-format --version | grep -oE 'version [0-9]+' | grep -oE '[0-9]+' | head -1)
if [ "$have" != "$want" ]; then
  echo "format: clang-format $have here, the tree is formatted with $want: skipped"
  exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' | grep -v '^tests/data/')
else
  mapfile -t files < <(find . -path ./tests/data -prune -o -path './build*' -prune -o \
    \( -name '*.cpp' -o -name '*.hpp' \) -print | sed 's|^\./||' | sort)
fi
[ ${#files[@]} -gt 100 ] || { echo "format: found only ${#files[@]} sources under $root"; exit 1; }

# Self-check: an unformatted line must be caught.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp .clang-format "$tmp/"
printf 'int  f( int x ){\nreturn x;}\n' >"$tmp/probe.cpp"
if (cd "$tmp" && clang-format --dry-run --Werror probe.cpp) >/dev/null 2>&1; then
  echo "format: clang-format --dry-run --Werror passed an unformatted file: the check cannot fail"
  exit 1
fi

bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: ${#bad[@]} of ${#files[@]} sources are not as .clang-format says:"
  printf '  %s\n' "${bad[@]}"
  echo "fix them with: clang-format -i ${bad[*]}"
  echo "(or only the lines your change touched: git clang-format main)"
  exit 1
fi
echo "format: ${#files[@]} sources as .clang-format says"
