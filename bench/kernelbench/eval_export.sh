#!/usr/bin/env bash
# On the GPU machine: KernelBench's own evaluator
# (eval_kernel_against_ref, imported from KernelBench's src/, never copied into this
# repository) on the ModelNew files `kernelskill export` writes for imported KernelBench
# problems. Imports the given problem files, lowers each with the
# rules coder (seed 0: a candidate at once, without a run), exports it with KernelBench's
# interface, then runs bench/kernelbench/eval_export.py: extensions built in parallel,
# each problem evaluated in its own process, one at a time on the GPU. Writes
# $OUT/results.md and results.json (compiled, correct, runtime, ref runtime per problem)
# and the logs of each stage.
#
#   bench/run.sh kb-eval PROBLEM.py|DIR ...      (builds kernelskill, kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/kernelbench/eval_export.sh PROBLEM.py|DIR ...
#   bench/run.sh kb-eval .devdeps/KernelBench/level1/{19_ReLU,23_Softmax,33_BatchNorm}.py
#   FROM_BENCH=build-gpu/kb-bench [VARIANT=full] bench/run.sh kb-eval
#
# FROM_BENCH: instead of importing and lowering, evaluate what a `kernelskill bench`
# directory exported (variants/VARIANT/models, the best kernel of each task's run), with
# the problem files it copied, loading the models it built (measure/build). With
# PERF_TRIALS=0 KernelBench checks correctness alone and EVAL_JOBS (default 1) problems
# are evaluated at once, each in its own process.
#
# Environment: OUT, BUILD, PYTHON (bench/common.sh); WORK (default BUILD/kernelbench-eval,
# kept between calls while the machine stays warm: a later call with the same problems
# resumes, skipping those evaluated); KB_SRC (.devdeps/KernelBench/src); BUDGET_S (570,
# the call's wall clock: what does not fit is listed as not evaluated); JOBS (4 problems
# imported and lowered at once: at the published sizes a level-1 tensor is up to 7.5 GB, and
# the graph export probes shapes on meta tensors or the GPU); LOWER_TIMEOUT_S
# (240 per problem); TRIALS (5) and PERF_TRIALS (100), as KernelBench's run_and_check.py.
set -uo pipefail
if [ $# -eq 0 ] && [ -z "${FROM_BENCH:-}" ]; then sed -n 2,29p "$0"; exit 2; fi
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
t0=$(date +%s)
out=$OUT
work=${WORK:-$BUILD/kernelbench-eval}
kb_src=${KB_SRC:-.devdeps/KernelBench/src}
deadline=$((t0 + ${BUDGET_S:-570}))
jobs=${JOBS:-4}
mkdir -p "$out" "$work"
[ -f "$kb_src/kernelbench/eval.py" ] || { echo "kernelbench_eval_export: $kb_src/kernelbench/eval.py not found (KB_SRC: KernelBench's src/)"; exit 2; }
if [ -n "${FROM_BENCH:-}" ]; then
  # The bench's exports, problems and builds: nothing to build, import or lower here.
  t1=$(date +%s); t2=$t1; t3=$t1
  what="the best kernels of kernelskill bench $FROM_BENCH, variant ${VARIANT:-full}"
  "$PYTHON" - "$FROM_BENCH" "${VARIANT:-full}" >"$work/manifest.json" <<'PY' || { echo "kernelbench_eval_export: $FROM_BENCH is not a bench directory with exports"; exit 2; }
import glob, json, os, sys
bench, variant = os.path.abspath(sys.argv[1]), sys.argv[2]
models = os.path.join(bench, "variants", variant, "models")
record = json.load(open(os.path.join(models, "export.json")))
rows = []
for problem in sorted(glob.glob(os.path.join(bench, "problems", "*", "*.py"))):
    level, name = os.path.basename(os.path.dirname(problem)), os.path.splitext(os.path.basename(problem))[0]
    e = record.get(name)
    row = {"name": level + "/" + name, "problem": problem, "export": None}
    if not isinstance(e, dict):
        row.update(stage="not run", error="the bench's run did not finish this task")
    elif e.get("file"):
        row.update(stage="exported", export=os.path.join(models, e["file"]), build_dir=os.path.join(bench, "measure", "build"))
    else:
        row.update(stage="no kernel", error=e.get("error", ""))
    rows.append(row)
print(json.dumps(rows, indent=1))
PY
else
  what="rules coder, seed 0"
# (the branch without FROM_BENCH: import, lower and export, at the left margin for the here-documents)
bench_need kernelskill kernelskill-gpu || exit 2
t1=$(date +%s)
ks=$BUILD/bin/kernelskill

# Import: one bounded child per problem; a problem that fails is reported and the rest go on.
rm -rf "$work/tasks"
"$ks" import kernelbench "$@" --out "$work/tasks" --python "$PYTHON" --jobs "$jobs" >"$out/import.log" 2>&1
cp "$work/tasks/import-report.json" "$out/" 2>/dev/null
t2=$(date +%s)

# Lower (rules coder, seed 0) and export each imported task not yet evaluated.
"$PYTHON" - "$work" >"$work/to-lower.txt" <<'PY'
import json, os, re, sys
work = sys.argv[1]
for e in json.load(open(os.path.join(work, "tasks", "import-report.json"))):
    name = os.path.basename(os.path.dirname(e["file"])) + "/" + os.path.splitext(os.path.basename(e["file"]))[0]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    if e["task"] and not os.path.exists(os.path.join(work, "results", safe + ".json")):
        print(safe, e["task"])
PY
lower_one() {  # SAFE_NAME TASK.yaml
  local safe=$1 task=$2 dir="$work/lowered/$1"
  rm -rf "$dir" && mkdir -p "$dir" "$work/exports"
  timeout "${LOWER_TIMEOUT_S:-240}" "$ks" lower "$task" --out "$dir" --seeds 1 >"$dir/lower.log" 2>&1
  echo "lower exit $?" >>"$dir/lower.log"
  [ -f "$dir/seed-0.cu" ] || return 0
  "$ks" export --task "$task" --kernel "$dir/seed-0.cu" --plan "$dir/seed-0.yaml" \
    --out "$work/exports/$safe.py" >"$dir/export.log" 2>&1 || rm -f "$work/exports/$safe.py"
}
export -f lower_one
export work ks
[ -s "$work/to-lower.txt" ] && xargs -P "$jobs" -n 2 bash -c 'lower_one "$0" "$1"' <"$work/to-lower.txt"
t3=$(date +%s)

# The manifest: every problem given, with how far it got.
"$PYTHON" - "$work" >"$work/manifest.json" <<'PY'
import json, os, re, sys
work = sys.argv[1]
rows = []
def tail(path):
    try:
        lines = [l for l in open(path).read().splitlines() if l.strip() and not l.startswith("lower exit")]
        return lines[-1][:300] if lines else ""
    except OSError:
        return ""
for e in json.load(open(os.path.join(work, "tasks", "import-report.json"))):
    name = os.path.basename(os.path.dirname(e["file"])) + "/" + os.path.splitext(os.path.basename(e["file"]))[0]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    export = os.path.join(work, "exports", safe + ".py")
    low = os.path.join(work, "lowered", safe)
    row = {"name": name, "problem": os.path.abspath(e["file"]), "export": None}
    if e["error"]:
        row.update(stage="import failed", error=e["error"])
    elif os.path.exists(os.path.join(work, "results", safe + ".json")):
        row.update(stage="evaluated", export=os.path.abspath(export))
    elif os.path.exists(export):
        row.update(stage="exported", export=os.path.abspath(export))
    elif os.path.exists(os.path.join(low, "seed-0.cu")):
        row.update(stage="export failed", error=tail(os.path.join(low, "export.log")))
    else:
        row.update(stage="lower failed", error=tail(os.path.join(low, "lower.log")))
    rows.append(row)
print(json.dumps(rows, indent=1))
PY

fi

# KernelBench's evaluator.
"$PYTHON" bench/kernelbench/eval_export.py --kb-src "$kb_src" --manifest "$work/manifest.json" --work "$work" \
  --out "$out" --trials "${TRIALS:-5}" --perf-trials "${PERF_TRIALS:-100}" --jobs 8 --deadline "$deadline" \
  --eval-jobs "${EVAL_JOBS:-1}" --what "$what" \
  2>&1 | tee "$out/eval.log" | tail -40
t4=$(date +%s)
cp "$work/manifest.json" "$out/"
mkdir -p "$out/exports" "$out/logs" && cp "$work"/exports/*.py "$out/exports/" 2>/dev/null
cp "$work"/logs/*.log "$out/logs/" 2>/dev/null
echo "kernelbench_eval_export: import $((t2 - t1)) s, lower+export $((t3 - t2)) s, evaluation $((t4 - t3)) s"
cat "$out/results.md"
