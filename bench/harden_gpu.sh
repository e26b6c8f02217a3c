#!/usr/bin/env bash
# On the GPU machine, for issue 18's hardening (docs/daemon.md, "Untrusted references",
# "GPU workers"): what only a GPU machine (LibTorch 2.x with CUDA) can show.
# - The worker's reference check runs its child on cuda:N under RLIMIT_DATA: an endless
#   loop and a 6.4 GB allocation are stopped there (gpu_worker_test [limits]), and every
#   review through a pool still passes with the check in front of it (the gpu tests).
# - The check of a module's __setstate__ compiles against LibTorch 2.x's SourceImporter
#   and reads its archives (reference_test [setstate] [untrusted]).
# - The worker's token handshake and the daemon's attacks (gpu_worker_test [auth],
#   daemon_hardening_test, secret_test), and the graph export's limits.
# Builds into build-gpu; logs under $OUT (default ./harden-gpu-out); a summary last.
#
#   bench/harden_gpu.sh            (from the repository root, with .devdeps carried)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-harden-gpu-out}
mkdir -p "$out"
source .devdeps/env.sh
{ nvidia-smi -L; git log -1 --format=%H 2>/dev/null; } >"$out/env.txt" 2>&1
t0=$(date +%s)
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16; } >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "harden_gpu: build failed"
  exit 1
fi
t1=$(date +%s)
fails=0
run() {  # name, command...
  local name=$1
  shift
  local s=$(date +%s)
  if "$@" >"$out/$name.log" 2>&1; then
    echo "harden_gpu: $name passed ($(( $(date +%s) - s )) s)"
  else
    echo "harden_gpu: $name FAILED ($(( $(date +%s) - s )) s); last lines:"
    tail -25 "$out/$name.log"
    fails=$((fails + 1))
  fi
}
b=build-gpu/bin
run worker-limits "$b/gpu_worker_test" "[limits]"
run worker-auth "$b/gpu_worker_test" "[auth]"
run setstate "$b/reference_test" "[setstate],[untrusted]"
run graph-limits "$b/rules_coder_test" "[limits]"
run secret "$b/secret_test"
run daemon-hardening "$b/daemon_hardening_test"
# Every gpu test; gpu_pool_test's reviews go through real workers, each task's
# reference checked on cuda:0 first.
run gpu-tests scripts/gpu-tests.sh build-gpu
echo "harden_gpu: build $((t1 - t0)) s; $fails failed"
[ $fails -eq 0 ]
