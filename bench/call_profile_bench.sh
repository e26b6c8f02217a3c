#!/usr/bin/env bash
# One device call: the CUPTI profile's cost under user and kernel replay at KernelBench
# sizes (bench/profile_replay.sh), then a first short `kernelskill bench` over a few
# KernelBench problems (bench/kernelbench_bench_gpu.sh with small L1/L2 and no rounds).
# $OUT gets summary.txt and r.tgz.
set -u
cd "$(dirname "$0")/.."
source .devdeps/env.sh
R=/tmp/r
mkdir -p "$R"
t0=$(date +%s)
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16 --target kernelskill kernelskill-gpu; } >"$R/build.log" 2>&1; then
  tail -30 "$R/build.log"; echo "build failed"; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s" >"$R/summary.txt"
OUT="$R/replay" SKIP_BUILD=1 timeout ${REPLAY_S:-200} bench/profile_replay.sh .devdeps/KernelBench >"$R/replay.log" 2>&1
echo "--- profile_replay (exit $?)" >>"$R/summary.txt"; cat "$R/replay/walls.txt" "$R/replay/replay.md" >>"$R/summary.txt" 2>/dev/null
left=$(( ${BUDGET:-560} - ($(date +%s) - t0) ))
OUT="$R/bench" L1=${L1:-3} L2=${L2:-2} SEEDS=1 ROUNDS=0 BUDGET=$(( left - 10 )) bench/kernelbench_bench_gpu.sh .devdeps/KernelBench >"$R/bench.out" 2>&1
echo "--- kernelbench_bench_gpu (exit $?)" >>"$R/summary.txt"; tail -30 "$R/bench.out" >>"$R/summary.txt"; cat "$R/bench/summary.md" >>"$R/summary.txt" 2>/dev/null
cp "$R/summary.txt" "$OUT/"
tar -czf "$OUT/r.tgz" --exclude='*.pt' --exclude='*.so' -C /tmp r 2>/dev/null
cut -c1-250 "$R/summary.txt" | tail -70
