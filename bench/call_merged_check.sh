#!/usr/bin/env bash
# One device call after merging the hardening (issue 18), GPU nodes (issue 19) and row
# split (issue 17) work: bench/harden_gpu.sh (build, the hardening tests that need
# LibTorch 2.x with CUDA, every gpu test) and bench/nodes_gpu.sh (two node agents on one
# H200, runs across them, one node killed mid-run, fleet_test), each bounded so the
# call ends in time. Logs under /tmp/r; $OUT gets summary.txt and r.tgz (the device
# returns at most 8 files).
#   bench/call_merged_check.sh
set -u
cd "$(dirname "$0")/.."
source .devdeps/env.sh
R=/tmp/r
mkdir -p "$R"
t0=$(date +%s)
left() { echo $(( ${BUDGET:-575} - ($(date +%s) - t0) )); }
# Build first with -k 0, so that one call shows every error a compiler here finds.
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16 -- -k 0; } >"$R/build.log" 2>&1; then
  grep -E 'error|FAILED' "$R/build.log" | head -40; echo "build failed"
  cp "$R/build.log" "$OUT/"; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s"
OUT="$R/harden" timeout 330 bench/harden_gpu.sh >"$R/harden.log" 2>&1
echo "--- harden_gpu (exit $?, $(( $(date +%s) - t0 )) s)" >"$R/summary.txt"
grep -E 'harden_gpu:' "$R/harden.log" | cut -c1-300 >>"$R/summary.txt"
tail -3 "$R/harden/gpu-tests.log" >>"$R/summary.txt" 2>/dev/null
grep -E '\(Failed\)|\(Skipped\)|\(Timeout\)' "$R/harden/gpu-tests.log" >>"$R/summary.txt" 2>/dev/null
t1=$(date +%s)
SKIP_BUILD=1 BUILD="$PWD/build-gpu" timeout $(( $(left) - 10 )) bench/nodes_gpu.sh "$R/nodes" >"$R/nodes.log" 2>&1
echo "--- nodes_gpu (exit $?, $(( $(date +%s) - t1 )) s)" >>"$R/summary.txt"
tail -25 "$R/nodes.log" | cut -c1-300 >>"$R/summary.txt"
cp "$R/summary.txt" "$OUT/"
tar -czf "$OUT/r.tgz" --exclude='*.pt' --exclude='*.so' -C /tmp r 2>/dev/null
tail -60 "$R/summary.txt"
