#!/usr/bin/env bash
# bench/kernelbench/bench.sh's DONE_IN: the problems a results CSV already has rows of
# the named run for are left out of the bench it starts (a run at one commit carried
# across sessions); rows of another run leave them in; when every problem picked has
# its row, nothing is started. The real kernelskill bench starts on the rest (without
# a GPU it stops after the import, which is all this needs).
#   tests/kb_bench_done_test.sh BUILD_DIR      (ctest runs it as kb_bench_done)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?the build directory}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ks-kb-done.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "kb_bench_done: $*"; [ -f "$tmp/build/$name.log" ] && cat "$tmp/build/$name.log"; exit 1; }
mkdir -p "$tmp/kb/level1" "$tmp/kb/level2" "$tmp/build"
cp "$root/tests/data/kernelbench/good/relu.py" "$tmp/kb/level1/19_ReLU.py"
cp "$root/tests/data/kernelbench/good/relu.py" "$tmp/kb/level1/20_ReLU.py"
cp "$root/tests/data/kernelbench/good/gemm_relu_divide.py" "$tmp/kb/level2/63_Gemm_ReLU_Divide.py"
# The bench's binaries, from the build under test (bench.sh reads BUILD/bin).
ln -s "$build/bin" "$tmp/build/bin"
header=$(head -1 "$root/docs/results/kernelbench.csv")
{
  echo "$header"
  echo '"the run, part 1",2026-12-07,abc1234,H100,1,19_ReLU,1.0,1.0,0.5,2.00,2.00,yes,yes,,,,,'
  echo 'another run,2026-12-07,abc1234,H100,2,63_Gemm_ReLU_Divide,1.0,1.0,0.5,2.00,2.00,yes,yes,,,,,'
} >"$tmp/rows.csv"
run_bench() {  # NAME DONE_IN: bench.sh over the three problems, stopped at once
  name=$1
  (cd "$root" && BUILD=$tmp/build OUT=$tmp/out-$1 PYTHON=python3 NAME=$1 BUDGET=26 STOP=1 \
    PICK1=19-20 PICK2=63 DONE_IN=$2 bash bench/kernelbench/bench.sh "$tmp/kb") >"$tmp/$1.out" 2>&1
}
run_bench part2 "$tmp/rows.csv:the run, part 1" || fail "bench.sh failed: $(cat "$tmp/part2.out")"
grep -q "DONE_IN: 1 of 3 problems have rows of run 'the run, part 1' and are left out" "$tmp/build/part2.log" ||
  fail "the row of 19_ReLU did not leave it out"
grep -q "kernelbench_bench_gpu: 2 problems" "$tmp/build/part2.log" || fail "the bench did not start on the other two"
run_bench other "$tmp/rows.csv:a run with no rows" || fail "bench.sh failed: $(cat "$tmp/other.out")"
grep -q "DONE_IN: 0 of 3 problems" "$tmp/build/other.log" || fail "rows of another run left problems out"
grep -q "kernelbench_bench_gpu: 3 problems" "$tmp/build/other.log" || fail "the bench did not start on all three"
echo 'the run,2026-12-07,abc1234,H100,1,20_ReLU,,,,,,no,,,,,,"build/load failed"' >>"$tmp/rows.csv"
echo 'the run,2026-12-07,abc1234,H100,2,63_Gemm_ReLU_Divide,1.0,1.0,0.5,2.00,2.00,yes,yes,,,,,' >>"$tmp/rows.csv"
echo 'the run,2026-12-07,abc1234,H100,1,19_ReLU,1.0,1.0,0.5,2.00,2.00,yes,yes,,,,,' >>"$tmp/rows.csv"
run_bench last "$tmp/rows.csv:the run" || fail "bench.sh with every row in failed: $(cat "$tmp/last.out")"
grep -q "every problem picked has its row; nothing to run" "$tmp/build/last.log" || fail "it did not say nothing was left"
grep -q "problems, .* GPU(s), started" "$tmp/build/last.log" && fail "it started a bench with nothing to run"
run_bench missing "$tmp/no-such.csv:the run" && fail "a CSV that is not there was taken"
grep -q "could not read" "$tmp/build/missing.log" || fail "a missing CSV was not named"
echo "kb_bench_done: ok"
