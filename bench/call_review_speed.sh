#!/usr/bin/env bash
# One device call (issue 16 items 1, 3 and 7; issue 15 item 3): build, the gpu-labelled
# tests, where a review's time goes at KernelBench sizes with inputs drawn on the device
# and on the CPU (bench/review_phases.sh), the CUPTI profile under user and kernel
# replay (bench/profile_replay.sh), and KernelBench's own evaluator on exported
# problems (bench/kernelbench_eval_export.sh), each bounded so the call ends in time.
# Everything goes to /tmp/r; $OUT gets summary.txt and r.tgz (the device returns at most
# 8 files).
#   bench/call_review_speed.sh
set -u
cd "$(dirname "$0")/.."
source .devdeps/env.sh
R=/tmp/r
mkdir -p "$R"
t0=$(date +%s)
left() { echo $(( ${BUDGET:-580} - ($(date +%s) - t0) )); }
{ nvidia-smi -L; python3 -c 'import torch; print(torch.__version__)'; git log -1 --format=%H 2>/dev/null; } >"$R/env.txt" 2>&1
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16; } >"$R/build.log" 2>&1; then
  tail -30 "$R/build.log"; echo "build failed"; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s" >"$R/summary.txt"
timeout 150 scripts/gpu-tests.sh build-gpu >"$R/gpu-tests.log" 2>&1
echo "gpu tests (exit $?): $(tail -1 "$R/gpu-tests.log")" >>"$R/summary.txt"
grep -E '\(Failed\)|\(Skipped\)|\(Timeout\)' "$R/gpu-tests.log" >>"$R/summary.txt"
OUT="$R/phases" MODES=device TRIALS=5 timeout 120 bench/review_phases.sh >"$R/phases.log" 2>&1
echo "--- review_phases, device, 5 trials (exit $?)" >>"$R/summary.txt"; cat "$R/phases/summary.txt" >>"$R/summary.txt" 2>/dev/null
OUT="$R/phases-cpu" MODES=cpu TRIALS=1 timeout 90 bench/review_phases.sh >"$R/phases-cpu.log" 2>&1
echo "--- review_phases, cpu, 1 trial (exit $?)" >>"$R/summary.txt"; cat "$R/phases-cpu/summary.txt" >>"$R/summary.txt" 2>/dev/null
OUT="$R/replay" SKIP_BUILD=1 timeout $(( $(left) / 2 )) bench/profile_replay.sh .devdeps/KernelBench >"$R/replay.log" 2>&1
echo "--- profile_replay (exit $?)" >>"$R/summary.txt"; cat "$R/replay/walls.txt" "$R/replay/replay.md" >>"$R/summary.txt" 2>/dev/null
OUT="$R/eval" SKIP_BUILD=1 BUDGET_S=$(( $(left) - 15 )) bench/kernelbench_eval_export.sh \
  .devdeps/KernelBench/level1/{19_ReLU,23_Softmax,33_BatchNorm,40_LayerNorm,47_Sum_reduction_over_a_dimension}.py \
  .devdeps/KernelBench/level2/{12_Gemm_Multiply_LeakyReLU,1_Conv2D_ReLU_BiasAdd}.py >"$R/eval.log" 2>&1
echo "--- kernelbench_eval_export (exit $?)" >>"$R/summary.txt"; cat "$R/eval/results.md" >>"$R/summary.txt" 2>/dev/null
tail -5 "$R/eval.log" >>"$R/summary.txt"
cp "$R/summary.txt" "$OUT/"
tar -czf "$OUT/r.tgz" --exclude='*.pt' --exclude='*.so' -C /tmp r 2>/dev/null
cat "$R/summary.txt" | cut -c1-300 | tail -80
