#!/usr/bin/env bash
# On the GPU machine: configure and build into build-gpu, run the tests labelled gpu
# (none may skip there: scripts/gpu-tests.sh) and then the rest of the suite except the
# CPU emulation (CI runs that). Logs go to $OUT (or ./gpu-check-out); a summary is
# printed last.
#
#   bench/gpu_check.sh            (from the repository root, with .devdeps carried)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
source .devdeps/env.sh
{ nvidia-smi -L; git log -1 --format=%H 2>/dev/null; } >"$out/env.txt" 2>&1
t0=$(date +%s)
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16; } >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "gpu_check: build failed"
  exit 1
fi
t1=$(date +%s)
scripts/gpu-tests.sh build-gpu >"$out/gpu-tests.log" 2>&1
gpu_rc=$?
t2=$(date +%s)
(cd build-gpu && ctest -j8 -E 'emulated' --output-on-failure) >"$out/ctest.log" 2>&1
all_rc=$?
t3=$(date +%s)
echo "gpu_check: build $((t1 - t0)) s; gpu tests $((t2 - t1)) s (exit $gpu_rc); suite $((t3 - t2)) s (exit $all_rc)"
tail -1 "$out/gpu-tests.log"
grep -E 'tests passed|tests failed out of' "$out/ctest.log" | tail -1
grep -E '\(Failed\)|\(Skipped\)|\(Timeout\)|Not Run' "$out/ctest.log" | head -20
[ $gpu_rc -eq 0 ] && [ $all_rc -eq 0 ]
