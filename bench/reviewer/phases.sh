#!/usr/bin/env bash
# Where a review's time goes at a large input size, with inputs drawn on the device and
# on the CPU (review.draw_inputs, docs/reviewer.md "Where inputs are drawn"): on the GPU
# machine, reviews examples/plans/relu against
# two relu tasks over one ROWS x COLS float32 input (default 4096 x 393216: 6.4 GB), one
# drawn from a distribution and one made by an input_program. Each review is a fresh
# process (`--repeat 2`: the first review pays for the task, the second is a warm
# candidate) and prints its phase times; `--run-reference` prints the draw alone.
#
#   bench/run.sh review-phases                  (builds kernelskill-gpu)
#   ROWS=4096 COLS=393216 TRIALS=5 MODES="device cpu" PROFILE=1 bench/run.sh review-phases
#   BUILD=DIR OUT=DIR PYTHON=PY bench/reviewer/phases.sh
#
# PROFILE=1 keeps the CUPTI profile in the reviews (left out by default: it is measured
# elsewhere and would hide the other phases). Logs and summary.txt go to OUT.
set -uo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill-gpu || exit 2
out=$OUT
rows=${ROWS:-4096}
cols=${COLS:-393216}
trials=${TRIALS:-5}
modes=${MODES:-device cpu}
noprof=--no-profile
[ -n "${PROFILE:-}" ] && noprof=
t1=$(date +%s)
gpu=$BUILD/bin/kernelskill-gpu
bench_record_env "$out/env.txt"

cat >"$out/relu_large.yaml" <<EOF
name: relu_large
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [$rows, $cols], init: {kind: normal, mean: 0, std: 1}}
seed: 2
EOF
cat >"$out/relu_large_program.yaml" <<EOF
name: relu_large_program
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [$rows, $cols], init: program}
input_program: |
  def inputs(device: Device) -> List[Tensor]:
      return [torch.randn([$rows, $cols], device=device) * torch.rand([1], device=device)]
seed: 3
EOF

summary="$out/summary.txt"
echo "review_phases: relu over x [$rows, $cols] float32, $trials trials, ${noprof:-with the CUPTI profile}; $(head -1 "$out/env.txt")" >"$summary"
for task in relu_large relu_large_program; do
  for mode in $modes; do
    log="$out/$task-$mode.log"
    timeout 300 "$gpu" --run-reference "$out/$task.yaml" --on cuda --draw-inputs "$mode" --log-level error >"$log" 2>&1
    echo "== $task, --run-reference --draw-inputs $mode (exit $?)" >>"$summary"
    grep -E "trial [0-9]: inputs" "$log" >>"$summary"
    s=$(date +%s.%N)
    timeout 500 "$gpu" --review "$out/$task.yaml" --source examples/plans/relu.cu --plan examples/plans/relu.yaml \
      --trials "$trials" --repeat 2 --draw-inputs "$mode" $noprof \
      --log-level warn >>"$log" 2>&1
    rc=$?
    e=$(date +%s.%N)
    echo "== $task, --review --draw-inputs $mode (exit $rc, process wall $("$PYTHON" -c "print(f'{$e - $s:.1f}')") s)" >>"$summary"
    grep -E "^reviewer::create|^review [0-9]+ of|^  time:" "$log" >>"$summary"
  done
done
t2=$(date +%s)
echo "review_phases: reviews $((t2 - t1)) s" >>"$summary"
cat "$summary"
