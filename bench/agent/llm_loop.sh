#!/usr/bin/env bash
# `kernelskill run` end to end on a GPU with the llm backend, the model being
# ks-scripted-llm (tests/support/scripted_llm_main.cpp) on loopback: streamed seeds from the
# example kernels (each task's first seed written with int64_t, which NVRTC refuses;
# its second cut off, its third with a plan typo: format repairs), real reviews on the
# GPU by a spawned kernelskill-gpu worker, diagnosis and repair, planning from real
# profiles, optimisation rounds (the kernels of tests/data/llm_replies where it has
# one for the method), and the output directory. Prints the run's summary.
#
#   bench/run.sh agent-loop        (builds kernelskill, kernelskill-gpu, ks-scripted-llm)
#   BUILD=DIR OUT=DIR bench/agent/llm_loop.sh
#
# Exit status: kernelskill run's (0 when every task ended with a correct kernel).
# SEEDS, ROUNDS, TRIALS in the environment shrink the run (defaults 2, 3, 5). The run
# works in WORK (default a temporary directory: the tasks, the store, the output); OUT
# gets its summary.md and relu's trajectory.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu ks-scripted-llm || exit 2
root=$bench_root
build=$BUILD
out=${WORK:-$(mktemp -d)}
mkdir -p "$out/tasks"

cp "$root/bench/suites/ops/relu.yaml" "$root/examples/tasks/gelu.yaml" "$root/examples/tasks/softmax.yaml" \
   "$out/tasks/"

# The server prints its port, then serves until its stdin closes.
coproc LLM { "$build/bin/ks-scripted-llm" --plans "$root/examples/plans" --replies "$root/tests/data/llm_replies" \
               relu=relu gelu=gelu_vec4 softmax=softmax_rows; }
read -r line <&"${LLM[0]}"
port="${line##*:}"
echo "scripted model on 127.0.0.1:$port"

cat >"$out/experiment.yaml" <<YAML
name: agent-loop-bench
tasks: [tasks/*.yaml]
budgets: {seeds: ${SEEDS:-2}, rounds: ${ROUNDS:-3}, repair_attempts: 2, tasks_in_flight: 2}
review: {trials: ${TRIALS:-5}}
coder:
  backend: llm
  llm: {provider: openai, endpoint: "http://127.0.0.1:$port/v1", model: scripted, timeout_s: 30}
gpus: {review_timeout_s: 120}
memory: {path: "$out/memory"}
output: {dir: "$out/run"}
YAML

"$build/bin/kernelskill" run "$out/experiment.yaml"
status=$?
echo "kernelskill run exit status: $status"
"$build/bin/kernelskill" trajectory relu --memory "$out/memory" >"$OUT/relu_trajectory.txt" 2>&1
head -60 "$OUT/relu_trajectory.txt"
cp "$out/run/summary.md" "$OUT/" 2>/dev/null
exec {LLM[1]}>&-
exit $status
