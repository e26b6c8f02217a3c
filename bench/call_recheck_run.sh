#!/usr/bin/env bash
# One device call: build; every gpu test (scripts/gpu-tests.sh: the reviewer's
# adversarial suite with the out-of-memory retry and the speedup re-check in place);
# reference_test [graph] under LibTorch 2.x (the meta probe's stand-ins); then
# bench/kernelbench_run.sh over the first 40 level-1 problems with TASKS_IN_FLIGHT (4)
# tasks at once for the rest of the call (issue 16 item 4: does the pool idle while
# work is queued). $OUT gets summary.txt and r.tgz (the device returns at most 8 files).
#   bench/call_recheck_run.sh
set -u
cd "$(dirname "$0")/.."
source .devdeps/env.sh
R=/tmp/r
mkdir -p "$R"
t0=$(date +%s)
left() { echo $(( ${BUDGET:-580} - ($(date +%s) - t0) )); }
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16 -- -k 0; } >"$R/build.log" 2>&1; then
  grep -E 'error|FAILED' "$R/build.log" | head -40; echo "build failed"
  cp "$R/build.log" "$OUT/"; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s" | tee "$R/summary.txt"
s=$(date +%s)
timeout 200 scripts/gpu-tests.sh build-gpu >"$R/gpu-tests.log" 2>&1
echo "--- gpu-tests (exit $?, $(( $(date +%s) - s )) s)" >>"$R/summary.txt"
grep -E 'gpu-tests:|tests passed|\(Failed\)|\(Skipped\)|\(Timeout\)' "$R/gpu-tests.log" >>"$R/summary.txt"
timeout 60 build-gpu/bin/reference_test "[graph]" >"$R/graph.log" 2>&1
echo "--- reference_test [graph] (exit $?)" >>"$R/summary.txt"
tail -2 "$R/graph.log" >>"$R/summary.txt"
s=$(date +%s)
lim=$(( $(left) - 45 ))
OUT="$R/run" WORK=/tmp/kbrun TASKS_IN_FLIGHT=${TASKS_IN_FLIGHT:-4} \
  timeout $(( lim + 40 )) bench/kernelbench_run.sh .devdeps/KernelBench 40 "$lim" >"$R/run.log" 2>&1
echo "--- kernelbench_run, $lim s for the run (exit $?, $(( $(date +%s) - s )) s)" >>"$R/summary.txt"
cat "$R/run/run-throughput.txt" >>"$R/summary.txt" 2>/dev/null
tail -3 "$R/run.log" >>"$R/summary.txt"
grep -h "graph export: not probed" /tmp/kbrun/run.log /tmp/kbrun/run/*.log 2>/dev/null | sort | uniq -c | head -20 >>"$R/summary.txt"
cp /tmp/kbrun/run.log /tmp/kbrun/import.log "$R/" 2>/dev/null
cp "$R/summary.txt" "$OUT/"
tar -czf "$OUT/r.tgz" --exclude='*.pt' --exclude='*.so' --exclude='build.log' -C /tmp r 2>/dev/null
cat "$R/summary.txt"
