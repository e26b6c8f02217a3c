#!/usr/bin/env bash
# How long a kernel takes to compile: NVRTC against nvcc -cubin (ks-compile-latency
# --reps 5) and a PyTorch load_inline build of the same kernels (their `kernelskill
# export` modules, each built in a fresh process with a fresh build directory: nothing
# cached), for the kernels of docs/reviewer.md's compile-latency table. On the GPU
# machine (nvcc, PyTorch with CUDA).
#
#   bench/run.sh compile-latency              (builds kernelskill, ks-compile-latency)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/reviewer/compile_latency.sh
#   LI_REPS (2) load_inline builds per kernel; WORK (default /tmp/ks-compile-latency).
# OUT gets compile_latency.md (both tables) and compile_latency.log.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill ks-compile-latency || exit 2
work=${WORK:-/tmp/ks-compile-latency}
mkdir -p "$work"
ks="$BUILD/bin/kernelskill"
log="$OUT/compile_latency.log"
: >"$log"
# task, kernel, plan, name: the kernels of docs/reviewer.md's table, with a task each for
# the export.
pairs=(
  "bench/suites/ops/relu.yaml examples/plans/relu.cu examples/plans/relu.yaml relu"
  "examples/tasks/gelu.yaml examples/plans/gelu_vec4.cu examples/plans/gelu_vec4.yaml gelu_vec4"
  "examples/tasks/softmax.yaml examples/plans/softmax_rows.cu examples/plans/softmax_rows.yaml softmax_rows"
  "examples/tasks/layernorm.yaml tests/data/export/layernorm.cu tests/data/export/layernorm.yaml rules_layernorm_seed0"
  "examples/tasks/matmul_bias_relu.yaml tests/data/export/matmul_bias_relu.cu tests/data/export/matmul_bias_relu.yaml rules_matmul_bias_relu_seed0"
)
files=()
mods=()
for p in "${pairs[@]}"; do
  set -- $p
  files+=("$2")
  "$ks" export --task "$1" --kernel "$2" --plan "$3" --out "$work/$4.py" 2>>"$log" && mods+=("$work/$4.py")
done
md="$OUT/compile_latency.md"
echo "## ks-compile-latency (NVRTC vs nvcc -cubin), $(nproc) cores" >"$md"
"$BUILD/bin/ks-compile-latency" --reps 5 "${files[@]}" >>"$md" 2>>"$log"
echo "## load_inline" >>"$md"
"$PYTHON" bench/reviewer/load_inline_latency.py --reps "${LI_REPS:-2}" "${mods[@]}" >>"$md" 2>>"$log"
cat "$md"
