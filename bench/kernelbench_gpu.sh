#!/usr/bin/env bash
# On the GPU machine (issue 15): build, run kernelbench_import_test, import KernelBench
# levels 1-3 (bench/kernelbench_import.sh), run a sample of the imported references on
# the GPU at their published sizes, and a short `kernelskill run` (rules coder) over a
# few imported level-2 problems whose inputs are small enough for the CPU graph export.
# Logs and tables go to $OUT (or ./kernelbench-gpu-out); a summary is printed last.
#
#   bench/kernelbench_gpu.sh KERNELBENCH_DIR        (repository root, .devdeps carried)
#   SKIP_REFERENCES=1 leaves out the sample of references on the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
kb=${1:?usage: bench/kernelbench_gpu.sh KERNELBENCH_DIR}
out=${OUT:-kernelbench-gpu-out}
work=${WORK:-/tmp/kernelbench-gpu}
mkdir -p "$out" "$work"
source .devdeps/env.sh
t0=$(date +%s)
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16; } >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"; echo "kernelbench_gpu: build failed"; exit 1
fi
t1=$(date +%s)
timeout 200 build-gpu/bin/kernelbench_import_test >"$out/kernelbench_import_test.log" 2>&1
test_rc=$?
t2=$(date +%s)
JOBS=14 timeout 240 bench/kernelbench_import.sh "$kb" build-gpu "$work/import" >"$out/import-summary.md" 2>&1
cp "$work/import/import.log" "$work/import/tasks/import-report.json" "$out/" 2>/dev/null
t3=$(date +%s)
# A sample of references on the GPU at the published sizes.
: >"$out/references.txt"
[ -n "${SKIP_REFERENCES:-}" ] || for t in level1/19_ReLU level1/23_Softmax level1/33_BatchNorm level1/40_LayerNorm level1/95_CrossEntropyLoss \
         level1/13_Matmul_for_symmetric_matrices level2/12_Gemm_Multiply_LeakyReLU level2/1_Conv2D_ReLU_BiasAdd; do
  y="$work/import/tasks/$t.yaml"
  [ -f "$y" ] || { echo "$t: not imported" >>"$out/references.txt"; continue; }
  timeout 60 build-gpu/bin/kernelskill-gpu --run-reference "$y" --on cuda --log-level error >>"$out/references.txt" 2>&1 \
    || echo "$t: exit $?" >>"$out/references.txt"
done
t4=$(date +%s)
# A short run over level-2 problems with small inputs (the graph export runs the
# reference once on the CPU).
python3 - "$work/import/tasks/level2" "$work/run-tasks" <<'PY'
import math, os, re, shutil, sys
src, dst = sys.argv[1:3]
os.makedirs(dst, exist_ok=True)
picked = []
for f in sorted(os.listdir(src)):
    if not f.endswith(".yaml"): continue
    text = open(os.path.join(src, f)).read()
    shapes = re.findall(r"^  - name: \w+\n    shape: (\[[^\]]*\])", text.split("parameters:")[0], re.M)
    n = sum(math.prod(eval(s)) for s in shapes)
    if n <= 8_000_000 and os.path.getsize(os.path.join(src, f[:-5] + ".pt")) < 200_000_000:
        picked.append(f)
for f in picked[:6]:
    shutil.copy(os.path.join(src, f), dst); shutil.copy(os.path.join(src, f[:-5] + ".pt"), dst)
print(" ".join(picked[:6]))
PY
cat >"$work/experiment.yaml" <<YAML
name: kernelbench-level2-sample
tasks: [run-tasks/*.yaml]
budgets: {seeds: 2, rounds: 1, tasks_in_flight: 2}
memory: {path: "$work/memory"}
output: {dir: "$work/run"}
YAML
timeout $(( 590 - ($(date +%s) - t0) )) build-gpu/bin/kernelskill run "$work/experiment.yaml" >"$out/run.log" 2>&1
run_rc=$?
cp "$work/run/summary.md" "$work/run/summary.json" "$out/" 2>/dev/null
t5=$(date +%s)
echo "kernelbench_gpu: build $((t1 - t0)) s; kernelbench_import_test $((t2 - t1)) s (exit $test_rc); import $((t3 - t2)) s; references $((t4 - t3)) s; run $((t5 - t4)) s (exit $run_rc)"
tail -3 "$out/kernelbench_import_test.log"
head -8 "$out/import-summary.md"
grep -c "on cuda" "$out/references.txt"
tail -15 "$out/summary.md" 2>/dev/null
