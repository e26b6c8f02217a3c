"""KernelBench's own evaluator on what `kernelskill export` writes for imported KernelBench
problems. Run by bench/kernelbench/eval_export.sh on the GPU machine.

    python3 bench/kernelbench/eval_export.py --kb-src .devdeps/KernelBench/src \\
        --manifest WORK/manifest.json --work WORK --out OUT [--trials 5] [--perf-trials 100] \\
        [--jobs 8] [--eval-jobs 1] [--deadline UNIX_SECONDS] [--timeout-s 300]

MANIFEST.json lists the problems: [{"name", "problem", "export" (or null), "stage",
"error", "build_dir" (optional)}], as the shell script writes it after importing,
lowering and exporting, or from a `kernelskill bench` directory (FROM_BENCH), whose
rows name the bench's own build directory so that its built models are loaded, not
built again. --perf-trials 0 asks KernelBench for correctness alone
(measure_performance=False); only then may --eval-jobs evaluate several problems at
once (each still in its own process): timed trials need the GPU to themselves.

What it promises:
- the judge is KernelBench's `eval_kernel_against_ref` (src/kernelbench/eval.py, imported
  from --kb-src, never copied here), called with the problem's own source and the
  exported file's source, as KernelBench's scripts call it (seed 42, fp32, its default
  tolerance 1e-4, cuda_event timing with its L2 flush, its excessive-speedup check,
  which also times the reference); nothing here decides correctness;
- each problem is evaluated in its own child process, one at a time on the GPU: a
  kernel that faults takes only its own CUDA context down, and is reported;
- the extensions are built first, several at once (nvcc is CPU work), each into the
  directory the evaluation then passes as build_dir, so load_inline finds it built;
- results are kept per problem under WORK/results/ (a later call skips what is done);
  OUT gets results.json and results.md for every problem of the manifest;
- KernelBench imports a few packages it does not use for this (dotenv, openai, litellm,
  tqdm in utils.py; requests in eval.py; pydantic for its result record). Where one is missing on the machine
  (it reaches no package registry), a stand-in is installed and named in the results:
  `shims`. The stand-ins do not touch evaluation, timing or comparison.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
import types


# ---------------------------------------------------------------------------------------
# Stand-ins for KernelBench's unused imports (only where the real package is missing).

def install_shims():
    installed = []

    def missing(name):
        try:
            __import__(name)
            return False
        except ImportError:
            return True

    if missing("dotenv"):
        m = types.ModuleType("dotenv")
        m.load_dotenv = lambda *a, **k: False
        sys.modules["dotenv"] = m
        installed.append("dotenv")
    if missing("openai"):
        m = types.ModuleType("openai")

        class OpenAI:  # the LLM client utils.py imports; evaluation never calls it
            def __init__(self, *a, **k):
                raise RuntimeError("openai is not installed (a stand-in for KernelBench's import)")
        m.OpenAI = OpenAI
        sys.modules["openai"] = m
        installed.append("openai")
    if missing("litellm"):
        m = types.ModuleType("litellm")

        def completion(*a, **k):
            raise RuntimeError("litellm is not installed (a stand-in for KernelBench's import)")
        m.completion = completion
        sys.modules["litellm"] = m
        installed.append("litellm")
    if missing("tqdm"):
        m = types.ModuleType("tqdm")
        m.tqdm = lambda iterable=None, *a, **k: iterable  # progress bars of utils.py's batch helpers
        sys.modules["tqdm"] = m
        installed.append("tqdm")
    if missing("requests"):
        sys.modules["requests"] = types.ModuleType("requests")  # eval.py imports it, calls nothing of it
        installed.append("requests")
    if missing("pydantic"):
        import copy
        m = types.ModuleType("pydantic")

        class BaseModel:
            """Fields from annotations with their defaults (copied, as pydantic copies
            mutable defaults), set from keywords; model_dump() gives them back."""

            def __init__(self, **values):
                for cls in reversed(type(self).__mro__):
                    for name in getattr(cls, "__annotations__", {}):
                        if name in cls.__dict__:
                            setattr(self, name, copy.deepcopy(cls.__dict__[name]))
                for name, value in values.items():
                    setattr(self, name, value)

            def _fields(self):
                out = []
                for cls in reversed(type(self).__mro__):
                    out += [n for n in getattr(cls, "__annotations__", {}) if n not in out]
                return out

            def model_dump(self):
                return {n: getattr(self, n, None) for n in self._fields()}

        m.BaseModel = BaseModel
        sys.modules["pydantic"] = m
        installed.append("pydantic")
    return installed


# ---------------------------------------------------------------------------------------
# Child modes.

def build_one(export_path, build_dir):
    """Builds the export's extension into build_dir (TORCH_EXTENSIONS_DIR, as KernelBench's
    load_custom_model sets it from build_dir)."""
    os.makedirs(build_dir, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
    import importlib.util
    spec = importlib.util.spec_from_file_location("ks_export_build", export_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    t0 = time.time()
    module.load_extension()
    print(json.dumps({"build_s": round(time.time() - t0, 1)}))


def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def eval_one(kb_src, problem_path, export_path, build_dir, trials, perf_trials, result_path):
    shims = install_shims()
    sys.path.insert(0, kb_src)
    import torch
    from kernelbench.eval import eval_kernel_against_ref
    problem_src = open(problem_path, encoding="utf-8").read()
    export_src = open(export_path, encoding="utf-8").read()
    t0 = time.time()
    timed = perf_trials > 0
    r = eval_kernel_against_ref(
        original_model_src=problem_src, custom_model_src=export_src, seed_num=42,
        num_correct_trials=trials, num_perf_trials=max(perf_trials, 1), measure_performance=timed,
        timing_method="cuda_event", verbose=False, build_dir=build_dir,
        device=torch.device("cuda", 0), backend="cuda", precision=torch.float32,
        check_for_excessive_speedup=timed)
    out = {"shims": shims, "eval_s": round(time.time() - t0, 1)}
    if r is None:  # KernelBench's answer to a lock-file error during the build
        out.update(compiled=False, correct=False, error="KernelBench returned no result (build lock; retry)")
    else:
        out.update(compiled=bool(r.compiled), correct=bool(r.correctness), runtime_ms=r.runtime,
                   ref_runtime_ms=r.ref_runtime, runtime_stats=jsonable(r.runtime_stats),
                   ref_runtime_stats=jsonable(r.ref_runtime_stats), metadata=jsonable(r.metadata))
    with open(result_path, "w") as f:
        json.dump(out, f, indent=1)


# ---------------------------------------------------------------------------------------
# The parent.

def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def child(args, timeout, log):
    with open(log, "a") as f:
        try:
            p = subprocess.run([sys.executable, __file__] + args, stdout=f, stderr=subprocess.STDOUT,
                               timeout=timeout)
            return p.returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def short_error(result):
    md = result.get("metadata") or {}
    for key in ("compilation_error", "runtime_error", "correctness_issue", "error_during_performance"):
        if md.get(key):
            text = str(md[key]).strip().splitlines()
            detail = f" (max diff {md['max_difference']})" if key == "correctness_issue" and "max_difference" in md else ""
            return f"{key}: {text[-1] if text else ''}"[:160] + detail
    return result.get("error", "")[:160]


def write_tables(out_dir, rows, args):
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"trials": args.trials, "perf_trials": args.perf_trials, "problems": rows}, f, indent=1)
    done = [r for r in rows if r.get("result")]
    correct = [r for r in done if r["result"].get("correct")]
    compiled = [r for r in done if r["result"].get("compiled")]
    lines = [
        f"# KernelBench's evaluator on `kernelskill export` ({args.what})", "",
        f"eval_kernel_against_ref: fp32 (atol = rtol = 1e-4), {args.trials} correctness trial(s), "
        + (f"{args.perf_trials} timed trial(s) (cuda_event, L2 flushed); times in ms as KernelBench's timing "
           "returns them (mean)." if args.perf_trials > 0 else "correctness only (measure_performance=False)."), "",
        f"{len(rows)} problems: {len(done)} evaluated, {len(compiled)} compiled, {len(correct)} correct.", "",
        "| problem | stage | compiled | correct | runtime ms | ref runtime ms | speedup | note |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
    shims = set()
    for r in rows:
        res = r.get("result") or {}
        shims.update(res.get("shims", []))
        rt, ref = res.get("runtime_ms", -1), res.get("ref_runtime_ms", -1)
        speed = f"{ref / rt:.2f}x" if isinstance(rt, (int, float)) and rt and rt > 0 and ref and ref > 0 else ""
        fmt = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) and v > 0 else ""
        note = (short_error(res) if res and not res.get("correct") else r.get("error", "")) or ""
        lines.append(f"| {r['name']} | {r['stage']} | {'yes' if res.get('compiled') else ('no' if res else '')} | "
                     f"{'yes' if res.get('correct') else ('no' if res else '')} | {fmt(rt)} | {fmt(ref)} | {speed} | "
                     f"{note.replace('|', '/')} |")
    if shims:
        lines += ["", f"Stand-ins for KernelBench imports missing on this machine: {', '.join(sorted(shims))} "
                      "(unused by the evaluation)."]
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(done), len(compiled), len(correct)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--build-one":
        return build_one(*sys.argv[2:4])
    if len(sys.argv) > 1 and sys.argv[1] == "--eval-one":
        a = sys.argv[2:]
        return eval_one(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), a[6])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb-src", required=True, help="KernelBench's src/ (holding kernelbench/eval.py)")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--work", required=True, help="extensions, logs and per-problem results (kept)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=5, help="num_correct_trials (KernelBench's scripts: 5)")
    ap.add_argument("--perf-trials", type=int, default=100, help="num_perf_trials (KernelBench's scripts: 100)")
    ap.add_argument("--jobs", type=int, default=8, help="extensions built at once")
    ap.add_argument("--what", default="rules coder, seed 0", help="what the exports are, for the table's title")
    ap.add_argument("--eval-jobs", type=int, default=1,
                    help="evaluations at once (only with --perf-trials 0: timing wants the GPU alone)")
    ap.add_argument("--deadline", type=float, default=0, help="unix time after which no evaluation starts")
    ap.add_argument("--timeout-s", type=float, default=300, help="per build and per evaluation")
    args = ap.parse_args()
    if args.eval_jobs > 1 and args.perf_trials > 0:
        sys.exit("--eval-jobs above 1 needs --perf-trials 0: KernelBench's timed trials need the GPU to themselves")
    if not os.path.exists(os.path.join(args.kb_src, "kernelbench", "eval.py")):
        sys.exit(f"--kb-src {args.kb_src}: no kernelbench/eval.py there (KernelBench's src/ directory)")
    args.work = os.path.abspath(args.work)  # build_dir lands in the evaluated source as a literal
    rows = json.load(open(args.manifest))
    os.makedirs(args.out, exist_ok=True)
    for sub in ("ext", "results", "logs"):
        os.makedirs(os.path.join(args.work, sub), exist_ok=True)
    deadline = args.deadline or float("inf")

    def paths(r):
        s = safe(r["name"])
        return (r.get("build_dir") or os.path.join(args.work, "ext", s), os.path.join(args.work, "results", s + ".json"),
                os.path.join(args.work, "logs", s + ".log"))

    todo = []
    for r in rows:
        ext, result, log = paths(r)
        if os.path.exists(result):
            r["result"] = json.load(open(result))
        elif r.get("export"):
            todo.append(r)

    # Extensions first, several at once (CPU), each where its evaluation will look.
    def build(r):
        ext, _, log = paths(r)
        if time.time() + 60 > deadline:
            return r, "not built: out of time"
        rc = child(["--build-one", r["export"], ext], min(args.timeout_s, max(1, deadline - time.time())), log)
        if rc == 0:
            return r, None
        if not r.get("build_dir"):  # a bench's build directory is shared by its models: left as it is
            shutil.rmtree(ext, ignore_errors=True)  # no half-built directory (or lock file) for the evaluation
        return r, f"the extension did not build ({rc}; {log})"

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r, why in pool.map(build, todo):
            if why:
                r["build_note"] = why
    # Then KernelBench's evaluation, one problem at a time on the GPU (several at once for
    # correctness alone). A build that failed above is evaluated all the same: KernelBench
    # reports its compile error.
    def evaluate(r):
        ext, result, log = paths(r)
        if r.get("build_note", "").startswith("not built") or time.time() + 30 > deadline:
            r["stage"] = "not evaluated (out of time)"
            return r
        rc = child(["--eval-one", args.kb_src, r["problem"], r["export"], ext, str(args.trials),
                    str(args.perf_trials), result], min(args.timeout_s, max(1, deadline - time.time())), log)
        if os.path.exists(result):
            r["result"] = json.load(open(result))
            r["stage"] = "evaluated"
        else:
            r["stage"] = "evaluation crashed" if rc != "timeout" else "evaluation timed out"
            text = open(log).read().strip() if os.path.exists(log) else ""
            r["error"] = f"exit {rc}" + (f": {text.splitlines()[-1][:200]}" if text else "") + f" ({log})"
        print(f"{r['name']}: {r['stage']}" + (f", correct={r['result'].get('correct')}" if r.get("result") else ""),
              flush=True)
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.eval_jobs)) as pool:
        list(pool.map(evaluate, todo))
    for r in rows:
        if r.get("result") and r["stage"] == "exported":
            r["stage"] = "evaluated"
    done, compiled, correct = write_tables(args.out, rows, args)
    print(f"kernelbench_eval_export: {len(rows)} problems, {done} evaluated, {compiled} compiled, {correct} correct")


if __name__ == "__main__":
    main()
