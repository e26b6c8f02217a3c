#!/usr/bin/env bash
# The CPU suites under AddressSanitizer and UndefinedBehaviorSanitizer: configures a
# build with KS_SANITIZE=address,undefined (default ./build-sanitize), builds the test
# programs named, and runs them with ctest. Any finding ends its test with a report.
#
#   scripts/sanitize.sh                    the default programs below
#   scripts/sanitize.sh store_test plan_test   these programs only
#   BUILD_DIR=out KS_SANITIZE=undefined scripts/sanitize.sh
#
# The default programs need neither LibTorch nor a GPU nor the kernelskill programs:
# LibTorch is not built with the sanitizers, and the programs that start
# kernelskill-gpu or bounded children (RLIMIT_AS, which AddressSanitizer's shadow
# memory cannot live under) are left to the ordinary build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-build-sanitize}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  programs=(content_hash_test secret_test config_test task_test plan_test skill_library_test
            decision_policy_test evidence_contract_test store_test store_fault_test
            trial_cache_test bench_report_test llm_accounting_test protocol_test)
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKS_SANITIZE="${KS_SANITIZE:-address,undefined}" ${CMAKE_ARGS:-} >/dev/null
targets=("${programs[@]}")
# store_test and store_fault_test kill a store_writer child mid-write.
for p in "${programs[@]}"; do
  case "$p" in store_test|store_fault_test) targets+=(store_writer) ;; esac
done
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
# halt_on_error: the first finding fails the test. detect_leaks stays on: a leak is a
# finding too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
labels=$(IFS='|'; echo "${programs[*]}")
cd "$build"
ctest --output-on-failure -j"$(nproc)" -L "^(${labels})\$"
