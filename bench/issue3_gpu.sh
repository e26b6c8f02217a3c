#!/usr/bin/env bash
# Issue 3's remaining benchmark parts, on the GPU machine (BUILD must hold kernelskill,
# kernelskill-gpu and ks-compile-latency, e.g. from bench/suite_gpu.sh):
#   compile_latency.md  NVRTC vs nvcc -cubin (ks-compile-latency --reps 5) and
#                       load_inline.md, a PyTorch load_inline build of the same kernels
#                       (their `kernelskill export` modules; fresh build dirs, no cache)
#   review_cost.txt     kernelskill-gpu --review --repeat 3 of the rules coder's mse_loss
#                       seed at the task's cpu size and at full size (2 GiB of inputs),
#                       with profile, without profile, and verify-only: wall time per
#                       review, and the candidate's and reference's own timed runs
#
#   source .devdeps/env.sh && bench/issue3_gpu.sh OUT_DIR [PARTS: latency review]
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: bench/issue3_gpu.sh OUT_DIR}"
shift
parts="${*:-latency review}"
build="${BUILD:-/tmp/ks-build-gb}"
work="${WORK:-/tmp/ks-issue3}"
mkdir -p "$out" "$work"
cd "$root"
ks="$build/bin/kernelskill"
gpu="$build/bin/kernelskill-gpu"

if [[ " $parts " == *" latency "* ]]; then
  # The kernels of docs/reviewer.md's table, with a task each for the export.
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
    "$ks" export --task "$1" --kernel "$2" --plan "$3" --out "$work/$4.py" 2>>"$out/issue3.log" && mods+=("$work/$4.py")
  done
  echo "## ks-compile-latency (NVRTC vs nvcc -cubin), $(nproc) cores" >"$out/compile_latency.md"
  "$build/bin/ks-compile-latency" --reps 5 "${files[@]}" >>"$out/compile_latency.md" 2>>"$out/issue3.log"
  echo "## load_inline" >>"$out/compile_latency.md"
  python3 bench/load_inline_latency.py --reps "${LI_REPS:-2}" "${mods[@]}" >>"$out/compile_latency.md" 2>>"$out/issue3.log"
  cat "$out/compile_latency.md"
fi

if [[ " $parts " == *" review "* ]]; then
  "$ks" lower bench/suites/ops/mse_loss.yaml --out "$work/mse" --seeds 1 --gpu-worker "$gpu" >>"$out/issue3.log" 2>&1
  : >"$out/review_cost.txt"
  for size in cpu ""; do
    for opts in "" "--no-profile" "--no-time --no-profile"; do
      echo "=== mse_loss size=${size:-default} options: ${opts:-(full review)}" >>"$out/review_cost.txt"
      s=$(date +%s.%N)
      "$gpu" --review bench/suites/ops/mse_loss.yaml --source "$work/mse/seed-0.cu" --plan "$work/mse/seed-0.yaml" \
        ${size:+--size $size} --trials 5 --repeat 3 $opts --json >"$work/review.json" 2>>"$out/review_cost.txt"
      e=$(date +%s.%N)
      echo "process wall: $(python3 -c "print(f'{$e - $s:.2f} s')")" >>"$out/review_cost.txt"
      python3 - "$work/review.json" >>"$out/review_cost.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ct, rt = r.get("candidate_time", {}), r.get("reference_time", {})
print(f"last review: status {r.get('status')}, trials {r.get('trials_passed')}/{r.get('trials_run')}, "
      f"candidate median {ct.get('median_ms', 0):.4f} ms x {ct.get('repetitions', 0)}, "
      f"reference median {rt.get('median_ms', 0):.4f} ms x {rt.get('repetitions', 0)}, "
      f"profile duration {r.get('profile', {}).get('duration_ms', 0):.4f} ms")
PY
    done
  done
  cat "$out/review_cost.txt"
fi
