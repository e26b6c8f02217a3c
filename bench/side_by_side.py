#!/usr/bin/env python3
"""PyTorch eager, torch.compile and KernelSkill's kernel, side by side in one process.

    python3 bench/side_by_side.py --models DIR [--run-dir RUN] [--out RESULTS.json]
                                  [--device N] [--trials 3] [--reps 30] [--compile-timeout 240]
                                  [--rerun-bits] TASK.yaml ...
    python3 bench/side_by_side.py --merge A.json B.json ... [--md TABLE.md]

For each task: the reference's TorchScript source (also Python) is exec'd as the eager
function and handed to torch.compile (default mode), as bench/torch_compile_baseline.py
does; "ours" is DIR/TASK.py, the ModelNew file `kernelskill export` wrote from the run's
best kernel, built with load_inline (build directory DIR/build/TASK, so a prebuilt
extension is reused: see --prebuild).

1. Correctness: `--trials` fresh inputs (the task's distributions, seeds 1000+k, drawn on
   the GPU by the module's get_inputs), ours against eager on the same inputs and the
   same parameters (ModelNew's), every element within the task's tolerance
   |ours - eager| <= atol + rtol * |eager|, NaN/Inf where eager is finite failing.
2. Timing of all three, alternated per repetition (eager, compile, ours, eager, ...)
   so that they see the same clocks: CUDA events around one call, L2 flushed (a
   memset of 256 MiB) before each, 3 warm-up calls each, median of `--reps`.
torch.compile's first call (the compile) is bounded by --compile-timeout; a timeout
or failure is reported in the table, and that task's compile column is left empty.

--prebuild builds every --models DIR/*.py extension in parallel worker processes first
(`--jobs`), timing each build; the side-by-side process then only loads them.
--warm-compile runs torch.compile once per task (several such processes can run at once)
so that the side-by-side's compile is served from inductor's on-disk caches; the
compile time in the table is then that of a warm cache.
"""
import argparse, glob, importlib.util, json, math, os, signal, statistics, sys, time, types


def load_yaml(path):
    import yaml
    with open(path) as f:
        return yaml.safe_load(f)


def import_model(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3].replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_one(args):
    """Builds one exported module's extension (in a worker process); returns timings."""
    path, build_root = args
    name = os.path.basename(path)[:-3]
    t0 = time.perf_counter()
    try:
        mod = import_model(path)
        d = os.path.join(build_root, name)
        os.makedirs(d, exist_ok=True)
        mod.load_extension(build_directory=d)
        return {"task": name, "build_s": time.perf_counter() - t0, "ok": True}
    except Exception as ex:  # the side-by-side reports it per task
        return {"task": name, "build_s": time.perf_counter() - t0, "ok": False, "error": str(ex)[-2000:]}


def prebuild(models, jobs):
    import multiprocessing as mp
    paths = sorted(glob.glob(os.path.join(models, "*.py")))
    os.environ.setdefault("MAX_JOBS", "2")
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    with ctx.Pool(jobs) as pool:
        results = pool.map(build_one, [(p, os.path.join(models, "build")) for p in paths], chunksize=1)
    wall = time.perf_counter() - t0
    for r in results:
        print(f"prebuild {r['task']:28} {'ok' if r['ok'] else 'FAILED'} {r['build_s']:.1f} s"
              + ("" if r["ok"] else "  " + r["error"].strip().splitlines()[-1][:200]), flush=True)
    print(f"prebuild: {sum(r['ok'] for r in results)}/{len(results)} built in {wall:.1f} s wall with {jobs} processes")
    return results


class Timeout(Exception):
    pass


def torch_setup(opts):
    import torch
    dev = torch.device("cuda", opts.device)
    torch.cuda.set_device(dev)
    # `torch` as TorchScript sees it (bench/torch_compile_baseline.py).
    torch_names = types.ModuleType("torch_names")
    for m in (torch.nn.functional, torch._C._nn, torch):
        torch_names.__dict__.update({k: getattr(m, k) for k in dir(m) if not k.startswith("__")})
    return torch, dev, torch_names


def prepare(torch, dev, torch_names, opts, path, build=True):
    """One task: the eager function, our module (when exported and built), the first
    inputs and the parameters (ModelNew's, or drawn as the task says without one)."""
    spec = load_yaml(path)
    name = spec["name"]
    row = {"task": name, "device": torch.cuda.get_device_name(dev)}
    tol = spec.get("tolerance", {})
    row["atol"], row["rtol"] = float(tol.get("atol", 1e-4)), float(tol.get("rtol", 1e-4))
    scope = {"torch": torch_names}
    exec(spec["reference"]["torchscript"], scope)
    eager = scope["forward"]
    model_path = os.path.join(opts.models, name + ".py")
    mod = model = None
    if os.path.exists(model_path):
        try:
            mod = import_model(model_path)
            d = os.path.join(opts.models, "build", name)
            os.makedirs(d, exist_ok=True)
            if build:
                t0 = time.perf_counter()
                mod.load_extension(build_directory=d)
                row["load_s"] = time.perf_counter() - t0
            model = mod.ModelNew().to(dev)
        except Exception as ex:
            row["ours_error"] = "build/load: " + str(ex).strip().splitlines()[-1][:300]
            model = None
    else:
        row["ours_error"] = "no exported model (no correct kernel from the run)"
    if model is not None:
        params = model.task_parameters()
        inputs = mod.get_inputs(seed=1000, device=dev)
    else:
        # Eager and compile still run: inputs and parameters as the task says.
        g = torch.Generator(device=dev).manual_seed(1000)
        def draw(t):
            init = t.get("init", {"kind": "normal"})
            init = {"kind": init} if isinstance(init, str) else init
            x = torch.empty(t["shape"], device=dev)
            if init.get("kind") == "uniform":
                return x.uniform_(init.get("low", 0), init.get("high", 1), generator=g)
            if init.get("kind") == "kaiming_uniform":
                b = 1 / math.sqrt(math.prod(t["shape"][1:]))
                return x.uniform_(-b, b, generator=g)
            return x.normal_(init.get("mean", 0), init.get("std", 1), generator=g)
        inputs = [draw(t) for t in spec["inputs"]]
        params = [draw(t) for t in spec.get("parameters", [])]
    return spec, row, eager, mod, model, inputs, params


def warm_compile(opts):
    """torch.compile every task once (same graph, shapes and parameters as the
    side-by-side), so that its later compile is served by inductor's on-disk caches."""
    torch, dev, torch_names = torch_setup(opts)
    for path in opts.tasks:
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                spec, row, eager, mod, model, inputs, params = prepare(torch, dev, torch_names, opts, path, build=False)
                torch.compile(eager)(*inputs, *params)
                torch.cuda.synchronize()
            print(f"warm {row['task']:28} {time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as ex:
            print(f"warm {path}: failed after {time.perf_counter() - t0:.1f} s: {str(ex).strip().splitlines()[0][:200]}", flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()


def close(ref, out, atol, rtol):
    """Every element of every output within |out - ref| <= atol + rtol * |ref|."""
    import torch
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if len(refs) != len(outs):
        return False
    for r_, o_ in zip(refs, outs):
        if r_.shape != o_.shape or r_.dtype != o_.dtype:
            return False
        r_, o_ = r_.double(), o_.double()
        good = ((o_ - r_).abs() <= atol + rtol * r_.abs()) | (o_ == r_) | (torch.isnan(o_) & torch.isnan(r_))
        if not bool(good.all()):
            return False
    return True


def side_by_side(opts):
    torch, dev, torch_names = torch_setup(opts)
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev)

    def events_ms(fn, args):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e)

    def on_alarm(signum, frame):
        raise Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    results = []
    for path in opts.tasks:
        t_task = time.perf_counter()
        with torch.no_grad():
            spec, row, eager, mod, model, inputs, params = prepare(torch, dev, torch_names, opts, path)
            name, atol, rtol = row["task"], row["atol"], row["rtol"]
            if opts.run_dir:
                oc = os.path.join(opts.run_dir, "tasks", name, "outcome.json")
                if os.path.exists(oc):
                    o = json.load(open(oc))
                    row.update(rounds=o.get("rounds"), run_speedup=o.get("speedup"), run_success=o.get("success"),
                               run_reason=o.get("reason"))
            # 1. Correctness of ours against eager.
            if model is not None:
                worst, passed = 0.0, 0
                try:
                    for k in range(opts.trials):
                        xs = inputs if k == 0 else mod.get_inputs(seed=1000 + k, device=dev)
                        ref = eager(*xs, *params)
                        out = model(*xs)
                        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
                        outs = out if isinstance(out, (tuple, list)) else (out,)
                        ok = len(refs) == len(outs)
                        for r_, o_ in zip(refs, outs):
                            if r_.shape != o_.shape or r_.dtype != o_.dtype:
                                ok = False
                                continue
                            r_, o_ = r_.double(), o_.double()
                            err = (o_ - r_).abs()
                            finite = torch.isfinite(r_)
                            good = (err <= atol + rtol * r_.abs()) | (o_ == r_) | (torch.isnan(o_) & torch.isnan(r_))
                            ok = ok and bool(good.all())
                            if finite.any():
                                worst = max(worst, float(err[finite].max()))
                        passed += ok
                        del xs, ref, out, refs, outs
                    row["correct"] = passed == opts.trials
                    row["trials_passed"] = passed
                    row["max_abs_error"] = worst
                    if opts.rerun_bits:
                        # Two runs on the same inputs: the same bits (no atomics whose
                        # order varies).
                        a, b = model(*inputs), model(*inputs)
                        a = a if isinstance(a, (tuple, list)) else (a,)
                        b = b if isinstance(b, (tuple, list)) else (b,)
                        row["bit_identical"] = all(bool(torch.equal(x, y)) for x, y in zip(a, b))
                        del a, b
                    # The general-shape launcher (plan evaluated at run time), at the
                    # default shapes and at every other exported size.
                    if getattr(mod, "GENERAL_LAUNCHER", False):
                        try:
                            checks = []
                            for size in mod.SIZES:
                                m2 = model if size == "default" else mod.ModelNew(size=size).to(dev)
                                xs = mod.get_inputs(size=size, seed=2000, device=dev)
                                checks.append(close(eager(*xs, *m2.task_parameters()), m2.forward_general(*xs), atol, rtol))
                                del xs
                            row["general_correct"] = all(checks)
                            row["general_sizes"] = list(mod.SIZES)
                        except Exception as ex:
                            row["general_correct"] = False
                            row["general_error"] = str(ex).strip().splitlines()[-1][:300]
                    # Shapes the export never saw: every dimension d of the default
                    # shapes (inputs and parameters) becomes d // 8 + 1, which keeps
                    # equal dimensions equal and 1s as 1s; where eager accepts them, ours
                    # must agree (the general launcher evaluates the plan for them).
                    if getattr(mod, "GENERAL_LAUNCHER", False):
                        shapes = [[d // 8 + 1 for d in sh] for sh in mod.SIZES["default"]]
                        n_in = len(mod.INPUTS)
                        g = torch.Generator(device=dev).manual_seed(3000)
                        xs = [mod._draw(sh, dt, init, g, dev) for (nm, dt, init), sh in zip(mod.INPUTS, shapes[:n_in])]
                        m3 = mod.ModelNew(parameter_shapes=shapes[n_in:]).to(dev)
                        try:
                            ref = eager(*xs, *m3.task_parameters())
                        except Exception:
                            ref = None  # the reference itself refuses these shapes
                        if ref is not None:
                            row["other_shapes"] = [list(sh) for sh in shapes]
                            try:
                                row["other_shape_correct"] = close(ref, m3(*xs), atol, rtol)
                            except Exception as ex:
                                row["other_shape_correct"] = False
                                row["other_shape_error"] = str(ex).strip().splitlines()[-1][:300]
                        del xs, m3, ref
                except Exception as ex:
                    row["correct"] = False
                    row["ours_error"] = "run: " + str(ex).strip().splitlines()[-1][:300]
                    model = None
            # 2. torch.compile, bounded.
            compiled = None
            try:
                if opts.no_compile:
                    raise RuntimeError("not run (--no-compile)")
                t0 = time.perf_counter()
                signal.alarm(opts.compile_timeout)
                compiled = torch.compile(eager)
                compiled(*inputs, *params)
                torch.cuda.synchronize()
                signal.alarm(0)
                row["compile_s"] = time.perf_counter() - t0
            except Timeout:
                row["compile_error"] = f"torch.compile did not finish within {opts.compile_timeout} s"
                compiled = None
            except Exception as ex:
                signal.alarm(0)
                row["compile_error"] = "torch.compile: " + str(ex).strip().splitlines()[0][:300]
                compiled = None
            # 3. Timing, alternated.
            fns = {"eager": (eager, (*inputs, *params))}
            if compiled is not None:
                fns["compile"] = (compiled, (*inputs, *params))
            if model is not None:
                fns["ours"] = (model, tuple(inputs))
            times = {k: [] for k in fns}
            for k, (fn, a) in fns.items():
                for _ in range(3):
                    fn(*a)
            torch.cuda.synchronize()
            for _ in range(opts.reps):
                for k, (fn, a) in fns.items():
                    times[k].append(events_ms(fn, a))
            for k, v in times.items():
                row[k + "_ms"] = statistics.median(v)
                row[k + "_min_ms"] = min(v)
            if "ours_ms" in row:
                row["speedup_ours"] = row["eager_ms"] / row["ours_ms"]
            if "compile_ms" in row:
                row["speedup_compile"] = row["eager_ms"] / row["compile_ms"]
        row["task_s"] = time.perf_counter() - t_task
        print(json.dumps(row), flush=True)
        results.append(row)
        if opts.out:
            with open(opts.out, "w") as f:
                json.dump(results, f, indent=1)
        del inputs, params, model, compiled, fns
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    return results


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def table(results):
    rows = sorted(results, key=lambda r: r["task"])
    lines = ["| task | eager ms | compile ms | ours ms | ours / eager | compile / eager | ours correct | rounds | note |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
    f = lambda v, p=4: "-" if v is None else f"{v:.{p}f}"
    for r in rows:
        note = "; ".join(x for x in (r.get("ours_error"), r.get("compile_error"),
                                     ("general-shape launcher failed: " + r.get("general_error", "wrong values")) if r.get("general_correct") is False else None,
                                     ("other shapes failed: " + r.get("other_shape_error", "wrong values")) if r.get("other_shape_correct") is False else None) if x)
        corr = "-" if "correct" not in r else ("yes" if r["correct"] else f"NO ({r.get('trials_passed', 0)} trials)")
        if r.get("bit_identical") is False:
            corr += ", reruns differ"
        lines.append(f"| {r['task']} | {f(r.get('eager_ms'))} | {f(r.get('compile_ms'))} | {f(r.get('ours_ms'))} | "
                     f"{f(r.get('speedup_ours'), 2) + 'x' if r.get('speedup_ours') else '-'} | "
                     f"{f(r.get('speedup_compile'), 2) + 'x' if r.get('speedup_compile') else '-'} | {corr} | "
                     f"{r.get('rounds', '-') if r.get('rounds') is not None else '-'} | {note.replace('|', '/')} |")
    n = len(rows)
    correct = sum(1 for r in rows if r.get("correct"))
    both = [r for r in rows if r.get("speedup_ours") and r.get("speedup_compile") and r.get("correct")]
    lines.append("")
    lines.append(f"Tasks: {n}. Ours correct at the task tolerance: {correct} of {n}.")
    lines.append(f"Geometric-mean speedup over eager: ours {geomean([r.get('speedup_ours') for r in rows if r.get('correct')]):.3f}x "
                 f"({correct} correct tasks), torch.compile {geomean([r.get('speedup_compile') for r in rows]):.3f}x "
                 f"({sum(1 for r in rows if r.get('speedup_compile'))} tasks).")
    gen = [r for r in rows if "general_correct" in r]
    lines.append(f"General-shape launcher (plan evaluated at run time, forward_general) correct at every exported size: "
                 f"{sum(1 for r in gen if r['general_correct'])} of {len(gen)}.")
    oth = [r for r in rows if "other_shape_correct" in r]
    lines.append(f"At shapes the export never saw (every dimension d -> d // 8 + 1, where eager accepts them): ours correct on "
                 f"{sum(1 for r in oth if r['other_shape_correct'])} of {len(oth)}.")
    lines.append(f"On the {len(both)} tasks where both ran and ours is correct: ours {geomean([r['speedup_ours'] for r in both]):.3f}x, "
                 f"torch.compile {geomean([r['speedup_compile'] for r in both]):.3f}x; ours faster than compile on "
                 f"{sum(1 for r in both if r['ours_ms'] < r['compile_ms'])} of them.")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--models", help="directory of exported ModelNew files, TASK.py")
    ap.add_argument("--run-dir", help="the kernelskill run output.dir (for rounds)")
    ap.add_argument("--out", help="write the results (JSON) here, updated after each task")
    ap.add_argument("--md", help="write the Markdown table here")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--compile-timeout", type=int, default=240)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--rerun-bits", action="store_true", help="run ours twice on the same inputs: bit_identical in the results")
    ap.add_argument("--prebuild", action="store_true", help="build every --models DIR/*.py extension in parallel, then stop")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--build-one", help="build this one exported model's extension (into --models DIR/build), then stop")
    ap.add_argument("--warm-compile", action="store_true", help="torch.compile each task once (fills inductor's caches), then stop")
    ap.add_argument("--merge", nargs="+", help="merge result files and print the table")
    opts = ap.parse_args()
    if opts.merge:
        results = [r for p in opts.merge if os.path.exists(p) for r in json.load(open(p))]
    elif opts.prebuild:
        prebuild(opts.models, opts.jobs)
        return
    elif opts.build_one:
        r = build_one((opts.build_one, os.path.join(opts.models, "build")))
        print(f"prebuild {r['task']:28} {'ok' if r['ok'] else 'FAILED'} {r['build_s']:.1f} s"
              + ("" if r["ok"] else "  " + r["error"].strip().splitlines()[-1][:200]), flush=True)
        return
    elif opts.warm_compile:
        warm_compile(opts)
        return
    else:
        if not opts.models or not opts.tasks:
            ap.error("--models and at least one task are needed")
        results = side_by_side(opts)
    md = table(results)
    print(md)
    if opts.md:
        with open(opts.md, "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()
