#!/usr/bin/env bash
# Everything one call on the GPU machine checks, in order of importance, each part
# bounded so that the whole ends within BUDGET seconds (default 570):
#   1. build kernelskill, kernelskill-gpu and ks-scripted-llm
#   2. `kernelskill run` with the default rules backend on the example tasks
#   3. bench/agent_loop.sh: the loop with the llm backend (scripted model)
#   4. bench/rules_review.sh on a subset of the KernelBench-style suite
# Results go to OUT_DIR as a few flat files (the device tool brings back 8):
# session.log, rules_summary.md, rules_trajectory.txt, llm_summary.md,
# llm_trajectory.txt, rules_review.txt.
#
#   source .devdeps/env.sh && bench/gpu_session.sh OUT_DIR
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: bench/gpu_session.sh OUT_DIR}"
work="$(mktemp -d)"
budget="${BUDGET:-570}"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( budget - $(elapsed) )); }
log() { echo "[$(elapsed) s] $*" | tee -a "$out/session.log"; }
cd "$root"

log "configure + build"
cmake -S . -B build-gpu -G Ninja ${KS_CMAKE_ARGS:-} >"$work/configure.log" 2>&1 || { tail -30 "$work/configure.log" | tee -a "$out/session.log"; exit 1; }
if ! cmake --build build-gpu -j16 --target kernelskill kernelskill-gpu ks-scripted-llm >"$work/build.log" 2>&1; then
  grep -E "error|FAILED" "$work/build.log" | head -30 | tee -a "$out/session.log"
  exit 1
fi
log "built; $(build-gpu/bin/kernelskill-gpu --list-devices | tail -1)"

# 2. The default backend on the example tasks.
mkdir -p "$work/rules"
cat >"$work/rules/experiment.yaml" <<YAML
name: rules-examples
tasks: [$root/examples/tasks/*.yaml]
budgets: {seeds: ${RULES_SEEDS:-2}, rounds: ${RULES_ROUNDS:-2}, repair_attempts: 1, tasks_in_flight: 2}
review: {trials: 3}
memory: {path: "$work/rules/memory"}
output: {dir: "$work/rules/run"}
YAML
t=$(( $(left) - 170 )); [ $t -lt 60 ] && t=60
log "kernelskill run, rules backend, example tasks (at most $t s)"
timeout -k 5 $t build-gpu/bin/kernelskill run "$work/rules/experiment.yaml" >"$work/rules.out" 2>"$work/rules.err"
log "kernelskill run exit status $? (124: stopped at the time bound)"
grep -E "^\[" "$work/rules.err" | grep -E "done|failed" | tee -a "$out/session.log"
grep -iE "error|warn" "$work/rules.err" | head -20 >>"$out/session.log"
cp "$work/rules/run/summary.md" "$out/rules_summary.md" 2>/dev/null
for t in softmax layernorm; do
  build-gpu/bin/kernelskill trajectory $t --memory "$work/rules/memory" >>"$out/rules_trajectory.txt" 2>&1
done
cat "$out/rules_summary.md" 2>/dev/null | tee -a "$out/session.log"

# 3. The loop with the llm backend and a scripted model.
t=$(( $(left) - 70 )); [ $t -lt 40 ] && t=40
log "bench/agent_loop.sh (at most $t s)"
SEEDS=1 ROUNDS=2 TRIALS=3 timeout -k 5 $t bench/agent_loop.sh build-gpu "$work/llm" >"$work/llm.log" 2>&1
log "agent_loop.sh exit status $?"
grep -E "done|failed|exit status" "$work/llm.log" | tee -a "$out/session.log"
cp "$work/llm/run/summary.md" "$out/llm_summary.md" 2>/dev/null
build-gpu/bin/kernelskill trajectory relu --memory "$work/llm/memory" >"$out/llm_trajectory.txt" 2>&1

# 4. The rules coder's kernels on part of the suite, reviewed one by one.
t=$(( $(left) - 5 ))
if [ $t -gt 20 ]; then
  log "bench/rules_review.sh on a suite subset (at most $t s)"
  SEEDS=1 TRIALS=2 timeout -k 5 $t bench/rules_review.sh build-gpu "$work/review" \
    bench/suites/ops/{relu,gelu_tanh,mish,softmax_dim1,log_softmax,rmsnorm,layernorm_gelu,sum_dim1,row_var,mse_loss,cumsum,max_pool2d,linear_gelu,conv2d_relu_bias,matmul_layernorm}.yaml \
    >"$out/rules_review.txt" 2>&1
  log "rules_review.sh exit status $?"
  tail -25 "$out/rules_review.txt" >>"$out/session.log"
fi
log "session done"
