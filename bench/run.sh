#!/usr/bin/env bash
# Builds what one suite needs and runs it: the one entry point of a session on the GPU
# machine (and of the CPU suites anywhere).
#
#   [BUILD=DIR] [OUT=DIR] [PYTHON=PY] bench/run.sh SUITE [ARGS...]
#   bench/run.sh --list            the suites, what each builds and runs
#
#   BUILD   build directory (default build-gpu: ignored by git, so a warm machine keeps
#           it, and the KernelBench bench's state in it, between calls)
#   OUT     where the suite leaves its results (default out/SUITE); on the device
#           machine its $OUT, which comes back
#   PYTHON  a Python with PyTorch (default python3), for the suites that run Python
#   PRE     a shell command run after the build, before the suite (a probe that shares
#           the call: bench/probes/...), bounded by PRE_LIMIT seconds (default 150)
#   WALL    the seconds this call may take in all: the suite's BUDGET becomes what is
#           left of it after the build and PRE, less 20 s to hand back its files
# ARGS and the suite's own settings (SEEDS=, BUDGET=, ... in the environment) go to its
# runner: each runner's header says what they are. bench/README.md has the commands
# that made the published tables.
#
# Optional: where .devdeps/env.sh exists (the GPU machine's own environment: CMake
# arguments in KS_CMAKE_ARGS, the Debian libraries carried with the call), it is
# sourced first. Nothing else in bench/ reads it; elsewhere, set KS_CMAKE_ARGS yourself
# if the default configuration does not fit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# suite | what it builds | what it runs | what it measures
suites=(
  "tests|all|-|every gpu-labelled test (scripts/gpu-tests.sh: none may skip), then the rest of ctest except the CPU emulation"
  "ops|kernelskill kernelskill-gpu|ops/side_by_side.sh|the ops suite: kernelskill run, export, then eager / torch.compile / ours side by side"
  "ops-seeds|kernelskill kernelskill-gpu|ops/review_seeds.sh|every rules-coder seed of the ops suite reviewed on the GPU"
  "nonfinite|kernelskill kernelskill-gpu|ops/nonfinite.sh|references with non-finite constants: reviewed, exported, side by side"
  "norms|kernelskill kernelskill-gpu|ops/norms.sh|norms, reductions and scans at KernelBench's sizes, side by side"
  "agent-loop|kernelskill kernelskill-gpu ks-scripted-llm|agent/llm_loop.sh|kernelskill run with the llm backend (a scripted model on loopback)"
  "kernelbench|kernelskill kernelskill-gpu|kernelbench/bench.sh|kernelskill bench over KernelBench's own problems, across calls"
  "ablation|kernelskill kernelskill-gpu|kernelbench/ablation.sh|the ablation full, no-ltm, no-stm over 26 KernelBench problems of levels 1-3, 2 seeds x 6 rounds, across calls"
  "kb-eval|kernelskill kernelskill-gpu|kernelbench/eval_export.sh|KernelBench's own evaluator on our exports"
  "kb-import|kernelskill kernelskill-gpu|kernelbench/import.sh|kernelskill import kernelbench over levels 1-3"
  "kb-lower|kernelskill kernelskill-gpu|kernelbench/lower_status.sh|import and lower (rules coder, no GPU) each problem: lowered or why not, seconds, memory"
  "kb-emulate|kernelskill kernelskill-gpu ks-emulate|kernelbench/emulate.sh|each problem at small sizes, its seeds run on the CPU (no GPU) against its reference: correct or why not"
  "kb-throughput|kernelskill kernelskill-gpu|kernelbench/run_throughput.sh|a kernelskill run's tasks per GPU-hour at KernelBench's sizes"
  "kb-profile|kernelskill kernelskill-gpu|kernelbench/profile.sh|each rules-coder seed of some problems, kernel by kernel, against eager and torch.compile"
  "review-examples|kernelskill-gpu|reviewer/examples.sh|a review of every example plan at full size"
  "review-phases|kernelskill-gpu|reviewer/phases.sh|where a review's time goes at a 6.4 GB input"
  "review-cost|kernelskill kernelskill-gpu|reviewer/review_cost.sh|a review's wall time with and without profile and timing"
  "compile-latency|kernelskill ks-compile-latency|reviewer/compile_latency.sh|NVRTC against nvcc -cubin and a load_inline build"
  "profile-replay|kernelskill kernelskill-gpu|reviewer/profile_replay.sh|the CUPTI profile's cost under user and kernel replay"
  "profile-vs-ncu|kernelskill-gpu|reviewer/profile_vs_ncu.sh|the worker's CUPTI metrics against Nsight Compute's"
  "nodes|kernelskill kernelskill-gpu fleet_test ks-scripted-gpu|fleet/nodes.sh|two node agents on one GPU, one killed mid-run"
  "daemon-attacks|kernelskill kernelskill-gpu ks-scripted-gpu|daemon/attacks.sh|a cancel's and a slow client's cost to a real daemon (no GPU)"
  "daemon-queue|kernelskill ks-queue-load|daemon/queue_rss.sh|the daemon's memory with a long queue (no GPU)"
  "daemon-load|kernelskill ks-daemon-load|daemon/load.sh|2,000 requests at once beside 300 slow bodies (no GPU)"
)

list() {
  printf '%-16s %s\n' SUITE "WHAT IT MEASURES (builds; runs)"
  local s name targets runner what
  for s in "${suites[@]}"; do
    IFS='|' read -r name targets runner what <<<"$s"
    printf '%-16s %s\n%-16s   (%s; %s)\n' "$name" "$what" "" "$targets" "$runner"
  done
}

case "${1:-}" in
  ""|-h|--help) sed -n 2,20p "$0" | sed 's/^# \{0,1\}//'; echo; list; exit 0 ;;
  --list) list; exit 0 ;;
esac
suite=$1
shift
entry=""
for s in "${suites[@]}"; do [ "${s%%|*}" = "$suite" ] && entry=$s; done
if [ -z "$entry" ]; then
  echo "bench/run.sh: no suite '$suite'; the suites:" >&2
  list >&2
  exit 2
fi
IFS='|' read -r _ targets runner _ <<<"$entry"

OUT=${OUT:-out/$suite}
# From the repository root, as the runners work (relative BUILD and OUT are taken from it).
cd "$here/.." || exit 1
# shellcheck disable=SC1091
[ -f .devdeps/env.sh ] && source .devdeps/env.sh
source "$here/common.sh"
bench_record_env "$OUT/env.txt"
if [ "$targets" = all ]; then bench_build || exit 1; else bench_build $targets || exit 1; fi
if [ -n "${PRE:-}" ]; then
  timeout "${PRE_LIMIT:-150}" bash -c "$PRE"
  echo "bench/run.sh: PRE ended with exit status $? after $(bench_elapsed) s"
fi
if [ -n "${WALL:-}" ]; then
  export BUDGET=$(( WALL - $(bench_elapsed) - 20 ))
  echo "bench/run.sh: ${BUDGET} s of WALL=${WALL} left to the suite"
fi

if [ "$suite" = tests ]; then
  s=$(date +%s)
  scripts/gpu-tests.sh "$BUILD" >"$OUT/gpu-tests.log" 2>&1
  gpu_rc=$?
  t=$(date +%s)
  (cd "$BUILD" && ctest -j8 -E 'emulated' --output-on-failure) >"$OUT/ctest.log" 2>&1
  all_rc=$?
  echo "bench/run.sh tests: gpu tests $((t - s)) s (exit $gpu_rc); the rest $(( $(date +%s) - t )) s (exit $all_rc)"
  tail -1 "$OUT/gpu-tests.log"
  grep -E 'tests passed|tests failed out of' "$OUT/ctest.log" | tail -1
  grep -E '\(Failed\)|\(Skipped\)|\(Timeout\)|Not Run' "$OUT/ctest.log" | head -20
  [ $gpu_rc -eq 0 ] && [ $all_rc -eq 0 ]
  exit
fi
exec "$here/$runner" "$@"
