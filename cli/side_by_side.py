#!/usr/bin/env python3
"""PyTorch eager, torch.compile and KernelSkill's kernel, side by side in one process.

    python3 cli/side_by_side.py --models DIR [--run-dir RUN] [--out RESULTS.json]
                                [--device N] [--trials 3] [--reps 30] [--compile-timeout 240]
                                [--rerun-bits] TASK.yaml ...
    python3 cli/side_by_side.py --merge A.json B.json ... [--md TABLE.md]

For each task: the reference's TorchScript source (also Python) is exec'd as the eager
function and handed to torch.compile (default mode); "ours" is DIR/TASK.py, the ModelNew
file `kernelskill export` wrote from the run's best kernel, built with load_inline (build
directory DIR/build/TASK, so a prebuilt extension is reused: see --prebuild).

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

KernelBench problems (`kernelskill bench`, which embeds this file and runs it with the
user's Python):

    python3 side_by_side.py --kb-manifest M.json --kb-prebuild --jobs N
    python3 side_by_side.py --kb-manifest M.json --kb-warm --jobs N --devices 0,1
    python3 side_by_side.py --kb-manifest M.json --kb-measure --device 0 --kb-out R.jsonl
    python3 side_by_side.py --kb-manifest M.json --kb-measure --kb-cpu-check --kb-out R.jsonl

No step waits without a bound: each model's build runs in a child process of its own
(its process group killed after the manifest's build_timeout, 600 s by default; the
build's lock file removed, so that no later build waits on it), each torch.compile
warm-up likewise (problem_timeout, 900 s: the worker process warming it is killed and a
fresh one takes the problems left), and the measuring process says which problem
and phase it is in (--kb-current FILE), so that kernelskill bench ends a problem that
runs past problem_timeout and records it as a failed row. A model that did not build is
a failed cell with the reason (builds/NAME/ks-build.json); the measurement never builds
it again without a bound.

Eager is the problem file's own Model, torch.compile compiles that Model, ours is the
exported ModelNew(*get_init_inputs()), built and seeded as KernelBench's evaluator does;
correctness is KernelBench's torch.allclose at 1e-4 and at 1e-2 over --trials inputs,
timing as above. --kb-cpu-check runs the correctness part alone on the CPU (no timing:
no CPU number is ever reported as a GPU one).
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


def on_alarm(signum, frame):
    raise Timeout()


def events_timer(torch, dev, flush_l2=True):
    """events_ms(fn, args): one call timed with CUDA events, the L2 flushed before it (a
    memset of 256 MiB, larger than any GPU's L2), as the reviewer times. flush_l2=False:
    right after a synchronize instead, so that no flush hides the host's time."""
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev) if flush_l2 else None

    def events_ms(fn, args):
        if flush is not None:
            flush.zero_()
        else:
            torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e)
    return events_ms


def time_alternated(torch, events_ms, fns, reps, warmup=3):
    """{name: [ms, ...]}: `warmup` calls of each, then `reps` rounds calling each once in
    turn (eager, compile, ours, eager, ...), so that all see the same clocks and heat."""
    times = {k: [] for k in fns}
    for k, (fn, a) in fns.items():
        for _ in range(warmup):
            fn(*a)
    torch.cuda.synchronize()
    for _ in range(reps):
        for k, (fn, a) in fns.items():
            times[k].append(events_ms(fn, a))
    return times


def torch_setup(opts):
    import torch
    dev = torch.device("cuda", opts.device)
    torch.cuda.set_device(dev)
    # `torch` as TorchScript sees it: aten ops such as torch.hardswish or torch.linear live
    # in torch._C._nn or torch.nn.functional in Python. A real module, so that
    # torch.compile traces through it like through torch itself.
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
    events_ms = events_timer(torch, dev)
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
            times = time_alternated(torch, events_ms, fns, opts.reps)
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


# --- KernelBench problems (`kernelskill bench`) --------------------------------------
# The problem file's own Model against the exported ModelNew, built as KernelBench's
# evaluator builds them (src/kernelbench/eval.py): the seed set before get_init_inputs,
# again before Model(*init_inputs) and again before ModelNew(*init_inputs); each trial's
# inputs from get_inputs after its own seed; correct when every trial passes
# torch.allclose(output, output_new, atol=tol, rtol=tol).
#
# The manifest (JSON, written by kernelskill bench) names the problems:
#   {"seed": 42, "trials": 3, "reps": 30, "warmup": 3, "compile_timeout": 120,
#    "tolerances": [1e-4, 1e-2], "builds": DIR,
#    "problems": [{"key": "level1/19_ReLU", "name": ..., "level": ..., "problem": FILE.py,
#                  "models": [{"variant": "full", "path": MODEL.py, "sha256": ...}]}]}
# --kb-measure appends one JSON line per problem to --kb-out as soon as it is measured
# (so that an interrupted measurement keeps what it finished).


def kb_set_seed(torch, seed):
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def kb_load_problem(path):
    spec = importlib.util.spec_from_file_location("kb_problem", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            raise RuntimeError(f"{path} does not define {name}")
    return mod


def kb_to(torch, xs, dev):
    return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in xs]


def kb_inputs(torch, problem, seed, dev):
    """get_inputs() after the trial's seed, on dev. PyTorch 2's default-device context
    draws them there (KernelBench's largest inputs take seconds on the CPU); where that
    fails or does not exist they are drawn on the CPU, as KernelBench does, and moved."""
    if dev.type == "cuda" and hasattr(dev, "__enter__"):
        try:
            kb_set_seed(torch, seed)
            with dev:
                return kb_to(torch, problem.get_inputs(), dev)
        except Exception:
            pass
    kb_set_seed(torch, seed)
    return kb_to(torch, problem.get_inputs(), dev)


def kb_trial_seeds(torch, seed, n):
    """KernelBench's correctness-trial seeds: drawn from the problem's seed."""
    torch.manual_seed(seed)
    return [int(torch.randint(0, 2 ** 32 - 1, (1,)).item()) for _ in range(n)]


def kb_outputs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def kb_check(torch, ref, out, tol):
    """KernelBench's check: same shapes, torch.allclose(output, output_new, tol, tol)."""
    refs, outs = kb_outputs(ref), kb_outputs(out)
    if len(refs) != len(outs):
        return False
    for r_, o_ in zip(refs, outs):
        if not isinstance(o_, torch.Tensor) or r_.shape != o_.shape or r_.dtype != o_.dtype:
            return False
        if not torch.allclose(r_, o_, atol=tol, rtol=tol):
            return False
    return True


def kb_max_abs_error(torch, ref, out):
    """The largest |out - ref| (inf where out is not finite and ref is), in the outputs'
    own precision and without index tensors: a boolean-mask index of a 7 GiB output
    made 56 GiB of int64 indices (KernelBench's 112 x 64 x 512 x 512 norms)."""
    worst = 0.0
    for r_, o_ in zip(kb_outputs(ref), kb_outputs(out)):
        if isinstance(o_, torch.Tensor) and r_.shape == o_.shape and o_.numel():
            a, b = (o_, r_) if o_.is_floating_point() and r_.is_floating_point() else (o_.double(), r_.double())
            d = (a - b).abs_()
            finite = torch.isfinite(d)
            worst = max(worst, float(d.masked_fill_(~finite, 0).max()))
            if not bool(finite.all()):
                worst = float("inf")
            del d, finite
    return worst


def kb_first_line(ex):
    text = str(ex).strip()
    return (text.splitlines()[-1] if text else type(ex).__name__)[:300]


def kb_build(m, builds, dev):
    """Imports an exported model file and builds its extension (when the file builds one
    itself with load_extension) under builds/MODULE_NAME: a kernel that two variants share
    is built once, and a build survives an interrupted measurement."""
    mod = import_model(m["path"])
    t0 = time.perf_counter()
    if hasattr(mod, "load_extension"):
        d = os.path.join(builds, getattr(mod, "MODULE_NAME", os.path.basename(m["path"])[:-3]))
        os.makedirs(d, exist_ok=True)
        if dev.type == "cuda":
            mod.load_extension(build_directory=d)
    return mod, time.perf_counter() - t0


def kb_construct(torch, problem, mods, seed, dev):
    """Model and each ModelNew as KernelBench's evaluator makes them."""
    kb_set_seed(torch, seed)
    init = kb_to(torch, problem.get_init_inputs(), dev)
    kb_set_seed(torch, seed)
    model = problem.Model(*init).to(dev)
    ours, errors = {}, {}
    for v, mod in mods.items():
        try:
            kb_set_seed(torch, seed)
            ours[v] = mod.ModelNew(*init).to(dev)
        except Exception as ex:
            errors[v] = "ModelNew(*get_init_inputs()): " + kb_first_line(ex)
    return model, ours, errors


def kb_correctness(torch, problem, model, ours, cells, cfg, dev):
    tols = cfg.get("tolerances", [1e-4, 1e-2])
    for v in ours:
        cells[v].update(trials=0, passed={str(t): 0 for t in tols}, max_abs_error=0.0)
    for ts in kb_trial_seeds(torch, cfg["seed"], cfg["trials"]):
        xs = kb_inputs(torch, problem, ts, dev)
        ref = model(*xs)
        for v, m in list(ours.items()):
            c = cells[v]
            c["trials"] += 1
            try:
                out = m(*xs)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
            except Exception as ex:
                c["error"] = "run: " + kb_first_line(ex)
                del ours[v]
                continue
            for t in tols:
                c["passed"][str(t)] += kb_check(torch, ref, out, t)
            c["max_abs_error"] = max(c["max_abs_error"], kb_max_abs_error(torch, ref, out))
            del out
        del xs, ref
    for v, c in cells.items():
        c["correct"] = {str(t): bool(c.get("trials")) and c["passed"][str(t)] == cfg["trials"] and "error" not in c
                        for t in tols} if "passed" in c else {str(t): False for t in tols}


def kb_compile(torch, model, xs, cfg, dev):
    """torch.compile(model) (default mode) and its first call, bounded in time."""
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(cfg.get("compile_timeout", 120)))
    try:
        compiled = torch.compile(model)
        compiled(*xs)
        torch.cuda.synchronize(dev)
        signal.alarm(0)
        return compiled, time.perf_counter() - t0, None
    except Timeout:
        return None, None, f"torch.compile did not finish within {cfg.get('compile_timeout', 120)} s"
    except Exception as ex:
        signal.alarm(0)
        return None, None, "torch.compile: " + kb_first_line(ex)


def kb_context_lost(text):
    """A CUDA error that leaves the process's context unusable (every later call fails)."""
    return any(k in text for k in ("illegal memory access", "device-side assert", "unspecified launch failure",
                                   "misaligned address", "illegal instruction", "CUDA error: an illegal"))


class ContextLost(Exception):
    pass


def kb_compile_correctness(torch, problem, model, compiled, row, cfg, dev):
    """torch.compile's own outputs against eager's, on the trials ours is checked on and
    at the same tolerances: whether the baseline it is compared with is within
    KernelBench's tolerance itself (row: compile_trials, compile_passed by tolerance,
    compile_max_abs_error). A failure here is recorded, not raised."""
    tols = cfg.get("tolerances", [1e-4, 1e-2])
    row["compile_trials"], row["compile_passed"], row["compile_max_abs_error"] = 0, {str(t): 0 for t in tols}, 0.0
    try:
        for ts in kb_trial_seeds(torch, cfg["seed"], cfg["trials"]):
            xs = kb_inputs(torch, problem, ts, dev)
            ref, out = model(*xs), compiled(*xs)
            torch.cuda.synchronize(dev)
            row["compile_trials"] += 1
            for t in tols:
                row["compile_passed"][str(t)] += kb_check(torch, ref, out, t)
            row["compile_max_abs_error"] = max(row["compile_max_abs_error"], kb_max_abs_error(torch, ref, out))
            del xs, ref, out
    except Exception as ex:
        row["compile_check_error"] = "torch.compile's correctness: " + kb_first_line(ex)


def kb_time(torch, dev, problem, model, ours, row, cells, cfg, events_ms):
    """torch.compile (bounded) and its correctness, then eager, compile and each of ours
    alternated."""
    xs = kb_inputs(torch, problem, kb_trial_seeds(torch, cfg["seed"], 1)[0], dev)
    compiled, compile_s, compile_error = kb_compile(torch, model, xs, cfg, dev)
    if compile_error:
        row["compile_error"] = compile_error
    else:
        row["compile_s"] = compile_s
        del xs
        kb_compile_correctness(torch, problem, model, compiled, row, cfg, dev)
        xs = kb_inputs(torch, problem, kb_trial_seeds(torch, cfg["seed"], 1)[0], dev)
    fns = {"eager": (model, xs)}
    if compiled is not None:
        fns["compile"] = (compiled, xs)
    for v, m in ours.items():
        fns["ours:" + v] = (m, xs)
    for k, v in time_alternated(torch, events_ms, fns, cfg["reps"], cfg.get("warmup", 3)).items():
        target = row if not k.startswith("ours:") else cells[k[5:]]
        name = k if not k.startswith("ours:") else "ours"
        target[name + "_ms"] = statistics.median(v)
        target[name + "_min_ms"] = min(v)


def kb_measure_problem(torch, dev, entry, cfg, events_ms):
    """One problem: correctness of each variant's ModelNew against the Model, then (with
    events_ms) the timing. Raises ContextLost, after filling the row, when a CUDA error
    has made the process's context unusable."""
    row = {"key": entry["key"], "name": entry["name"], "level": entry["level"], "device": str(dev),
           "torch": torch.__version__, "timed": events_ms is not None, "variants": {}}
    if dev.type == "cuda":
        row["device"] = torch.cuda.get_device_name(dev)
    cells = {m["variant"]: {"sha256": m["sha256"]} for m in entry["models"]}
    row["variants"] = cells
    mods = {}
    kb_phase(cfg, entry, "build/load")
    for m in entry["models"]:
        try:
            # Built here only in a bounded child, once: a model whose build failed or ran
            # out of time is a failed cell with the reason, never waited on.
            if dev.type == "cuda" and not kb_built(m["path"], cfg["builds"]) and \
                    kb_build_record(m["path"], cfg["builds"]) is None:
                kb_prebuild_models([m["path"]], cfg["builds"], 1, int(cfg.get("build_timeout", 600)))
            rec = kb_build_record(m["path"], cfg["builds"])
            if not kb_built(m["path"], cfg["builds"]) and rec and not rec.get("ok"):
                raise RuntimeError(rec.get("error") or "the model was not built")
            if dev.type == "cuda" and not kb_built(m["path"], cfg["builds"]):
                raise RuntimeError("the model was not built")
            lock = os.path.join(kb_build_dir(m["path"], cfg["builds"]), "lock")
            if os.path.exists(lock):
                os.remove(lock)  # left by a killed build: torch's loader would wait on it forever
            mods[m["variant"]], cells[m["variant"]]["build_s"] = kb_build(m, cfg["builds"], dev)
        except Exception as ex:
            cells[m["variant"]]["error"] = "build/load: " + kb_first_line(ex)
    t_problem = time.perf_counter()
    kb_phase(cfg, entry, "correctness")
    try:
        with torch.no_grad():
            problem = kb_load_problem(entry["problem"])
            model, ours, errors = kb_construct(torch, problem, mods, cfg["seed"], dev)
            for v, e in errors.items():
                cells[v]["error"] = e
            kb_correctness(torch, problem, model, ours, cells, cfg, dev)
    except Exception as ex:
        # The problem's own Model (or the machine) failed: ours cannot be checked.
        row["error"] = "the problem's Model: " + kb_first_line(ex)
        for c in cells.values():
            c.setdefault("error", "not checked (the problem's Model failed)")
            c["correct"] = {str(t): False for t in cfg.get("tolerances", [1e-4, 1e-2])}
        ours = {}
    lost = any(kb_context_lost(c.get("error", "")) for c in cells.values()) or kb_context_lost(row.get("error", ""))
    if events_ms is not None and ours and not lost:
        kb_phase(cfg, entry, "torch.compile and timing")
        try:
            with torch.no_grad():
                kb_time(torch, dev, problem, model, ours, row, cells, cfg, events_ms)
        except Exception as ex:
            # Correctness stands; this problem has no times.
            row["timing_error"] = "timing: " + kb_first_line(ex)
            lost = kb_context_lost(row["timing_error"])
    row["problem_s"] = time.perf_counter() - t_problem
    if lost:
        raise ContextLost(row)
    return row


def kb_manifest(path):
    with open(path) as f:
        return json.load(f)


def kb_phase(cfg, entry, phase):
    """Says which problem and phase this process is in (--kb-current, read by kernelskill
    bench, which ends a problem that runs past problem_timeout)."""
    path = cfg.get("_current")
    if not path:
        return
    now = time.time()
    if cfg.get("_current_key") != entry["key"]:
        cfg["_current_key"], cfg["_current_started"] = entry["key"], now
    kb_write_json(path, {"key": entry["key"], "phase": phase, "started": cfg["_current_started"], "pid": os.getpid()})


def kb_measure(opts):
    """Measures the manifest's problems on one device, one JSON line each to --kb-out."""
    import torch
    cfg = kb_manifest(opts.kb_manifest)
    if opts.kb_cpu_check:
        dev, events_ms = torch.device("cpu"), None
    else:
        dev = torch.device("cuda", opts.device)
        torch.cuda.set_device(dev)
        events_ms = events_timer(torch, dev)
    cfg["_current"] = opts.kb_current
    problems = cfg["problems"]
    for i, entry in enumerate(problems):
        lost = False
        try:
            row = kb_measure_problem(torch, dev, entry, cfg, events_ms)
        except ContextLost as ex:
            row, lost = ex.args[0], True
        with open(opts.kb_out, "a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        parts = [f"eager {row['eager_ms']:.4f} ms" if "eager_ms" in row else None,
                 f"compile {row['compile_ms']:.4f} ms" if "compile_ms" in row else row.get("compile_error")]
        for v, c in row["variants"].items():
            ok = c.get("correct", {})
            parts.append(f"{v} " + (f"{c['ours_ms']:.4f} ms " if "ours_ms" in c else "")
                         + "correct " + "/".join("yes" if ok.get(str(t)) else "no" for t in cfg.get("tolerances", []))
                         + (f" ({c['error']})" if "error" in c else ""))
        print(f"[measure {dev}] {i + 1}/{len(problems)} {entry['key']}: " + ", ".join(p for p in parts if p)
              + "".join(f"; {row[k]}" for k in ("error", "timing_error") if k in row), file=sys.stderr, flush=True)
        if lost:
            # Every later call in this process would fail: stop, and let kernelskill bench
            # start a fresh process for the problems left.
            print(f"[measure {dev}] the CUDA context is lost; stopping this process", file=sys.stderr, flush=True)
            sys.exit(3)
        torch.cuda.empty_cache() if dev.type == "cuda" else None
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()


def kb_module_name(path):
    """The MODULE_NAME an exported file builds (content-addressed), read from its text."""
    import re
    with open(path) as f:
        m = re.search(r'^MODULE_NAME = "([A-Za-z0-9_]+)"', f.read(), re.M)
    return m.group(1) if m else None


def kb_build_dir(path, builds):
    return os.path.join(builds, kb_module_name(path) or os.path.basename(path)[:-3])


def kb_built(path, builds):
    """True when the file's extension is built already (builds/NAME/NAME.so)."""
    name = kb_module_name(path)
    return bool(name) and os.path.exists(os.path.join(builds, name, name + ".so"))


def kb_build_record(path, builds):
    """What the last bounded build of this model recorded (builds/NAME/ks-build.json:
    ok, error, timed_out, bound, seconds), or None."""
    try:
        with open(os.path.join(kb_build_dir(path, builds), "ks-build.json")) as f:
            return json.load(f)
    except Exception:
        return None


def kb_write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def kb_kill_group(p):
    """Kills the child `p` with its whole process group (nvcc and ninja, compile workers)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kb_last_line(f):
    """The last line a child wrote to the file `f` (its stderr), at most 300 characters."""
    f.seek(0)
    tail = f.read().decode("utf-8", "replace").strip().splitlines()
    return tail[-1][:300] if tail else ""


def kb_bounded(jobs, work, timeout, done):
    """Runs the commands of `work` ([(item, argv)]) as child processes, at most `jobs` at
    once, each in a session of its own; one still running after `timeout` seconds has its
    whole process group killed (nvcc and ninja with it). done(item, rc, seconds,
    timed_out, stderr_tail) is called as each ends."""
    import subprocess, tempfile
    queue, running = list(work), []
    while queue or running:
        while queue and len(running) < max(1, jobs):
            item, argv = queue.pop(0)
            err = tempfile.TemporaryFile()
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
            running.append((item, p, err, time.monotonic()))
        time.sleep(0.2)
        still = []
        for item, p, err, t0 in running:
            late = p.poll() is None and time.monotonic() - t0 > timeout
            if late:
                kb_kill_group(p)
            if p.poll() is None and not late:
                still.append((item, p, err, t0))
                continue
            p.wait()
            tail = kb_last_line(err)
            err.close()
            done(item, p.returncode, time.monotonic() - t0, late, tail)
        running = still


def kb_build_model(opts):
    """--kb-build-model PATH: builds one model's extension (the child of kb_prebuild)."""
    import torch
    kb_build({"path": opts.kb_build_model}, opts.kb_builds, torch.device("cuda"))


def kb_prebuild_models(paths, builds, jobs, bound, retry_failed=True):
    """Builds the models in bounded child processes (kb_bounded): each gets `bound`
    seconds, and ks-build.json in its build directory records how it ended. A model built
    already is left as it is; one that ran out of time under the same bound or a longer
    one is not tried again (it would only spend that time again); one that failed
    otherwise is tried again when retry_failed."""
    by_dir = {}
    for p in paths:
        if kb_built(p, builds):
            continue
        rec = kb_build_record(p, builds)
        if rec and rec.get("timed_out") and rec.get("bound", 0) >= bound:
            continue
        if rec and not rec.get("ok") and not retry_failed:
            continue
        by_dir.setdefault(kb_build_dir(p, builds), p)  # one build per module (same text)
    if len(by_dir) < len(paths):
        print(f"[build] {len(paths) - len(by_dir)} of {len(paths)} models built already (or not to be tried again)",
              file=sys.stderr, flush=True)
    if not by_dir:
        return
    os.environ.setdefault("MAX_JOBS", "2")
    for d in by_dir:
        # No build of this module runs now (one child per module, and kernelskill bench
        # runs one pass of builds at a time): a lock left by a killed build would make
        # torch's builder wait for it forever.
        if os.path.exists(os.path.join(d, "lock")):
            os.remove(os.path.join(d, "lock"))

    def done(item, rc, secs, late, tail):
        d, path = item
        if late and os.path.exists(os.path.join(d, "lock")):
            os.remove(os.path.join(d, "lock"))
        ok = rc == 0 and not late
        err = "" if ok else (f"did not build within {bound} s (the build's time bound; killed)" if late else
                             tail or f"the build exited with status {rc}")
        kb_write_json(os.path.join(d, "ks-build.json"),
                      {"ok": ok, "error": err, "timed_out": late, "bound": bound, "seconds": round(secs, 1)})
        print(f"[build] {path}: {'built' if ok else 'FAILED'} in {secs:.1f} s" + ("" if ok else f": {err}"),
              file=sys.stderr, flush=True)

    work = [((d, p), [sys.executable, os.path.abspath(__file__), "--kb-build-model", p, "--kb-builds", builds])
            for d, p in by_dir.items()]
    kb_bounded(jobs, work, bound, done)


def kb_prebuild(opts):
    """Builds every model of the manifest in parallel bounded processes (nvcc; the GPU
    only names the architecture), so that the measuring processes only load them."""
    cfg = kb_manifest(opts.kb_manifest)
    paths = sorted({m["path"] for p in cfg["problems"] for m in p["models"]})
    kb_prebuild_models(paths, cfg["builds"], opts.jobs, int(cfg.get("build_timeout", 600)))


def kb_warm_marker(entry):
    """Where a finished warm-up of this problem is recorded: beside the inductor cache it
    filled (TORCHINDUCTOR_CACHE_DIR, set from the manifest), so that the record and the
    cache are lost together."""
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return os.path.join(root, "ks-warmed", entry["key"].replace("/", "__") + ".json") if root else None


def kb_file_sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def kb_warmed(entry):
    """True when this problem file's Model was compiled into the cache already."""
    marker = kb_warm_marker(entry)
    try:
        with open(marker) as f:
            return json.load(f).get("problem_sha256") == kb_file_sha256(entry["problem"])
    except Exception:
        return False


def kb_warm_one(entry, cfg, device):
    """torch.compile of one problem's Model and its first call; returns (error, seconds).
    Every failure is returned, none raised: the worker goes on to its next problem."""
    t0 = time.perf_counter()
    try:
        problem = kb_load_problem(entry["problem"])
        import torch
        dev = torch.device("cuda", device)
        torch.cuda.set_device(dev)
        with torch.no_grad():
            model, _, _ = kb_construct(torch, problem, {}, cfg["seed"], dev)
            xs = kb_inputs(torch, problem, kb_trial_seeds(torch, cfg["seed"], 1)[0], dev)
            _, _, err = kb_compile(torch, model, xs, cfg, dev)
            del model, xs
    except Exception as ex:
        err = kb_first_line(ex)
    secs = time.perf_counter() - t0
    marker = kb_warm_marker(entry)
    if not err and marker:
        # Only a compile that succeeded is recorded: one that failed (out of memory beside
        # the run's reviews, say) is tried again by the next warm-up.
        import torch
        kb_write_json(marker, {"problem_sha256": kb_file_sha256(entry["problem"]), "seconds": secs,
                               "torch": torch.__version__})
    return err, secs


def kb_warm_worker(opts):
    """--kb-warm-worker: warms the problems whose keys arrive on stdin, one a line, in this
    one process (the child of kb_warm), answering each with a JSON line on stdout. One
    process for many problems: PyTorch's import, dynamo's and inductor's start-up and
    inductor's compile workers are paid once, not per problem (in a process of its own,
    each of level 1's 34 convolutions took 18-22 s on an H100, whatever its size)."""
    cfg = kb_manifest(opts.kb_manifest)
    entries = {p["key"]: p for p in cfg["problems"]}
    # The answers get a descriptor of their own: whatever PyTorch prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        err, secs = kb_warm_one(entries[key], cfg, opts.device) if key in entries else (
            f"not in the manifest {opts.kb_manifest}", 0.0)
        answers.write(json.dumps({"key": key, "error": err, "seconds": secs}) + "\n")
        answers.flush()
        # The next problem starts from a clean slate: dynamo's compiled frames and the
        # cached GPU memory of this one released.
        if "torch" in sys.modules:
            import torch
            try:
                torch._dynamo.reset()
            except Exception:
                pass
            import gc
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def kb_warm(opts):
    """torch.compile of every problem's Model once, so that the measuring process's
    compile is served by inductor's on-disk caches. A problem warmed already (during the
    run) is left out. At most --jobs worker processes (kb_warm_worker), each handed the
    next problem as it finishes one; each problem is bounded by problem_timeout seconds
    (a worker's first also pays the worker's start-up): a worker still on a problem after
    that is killed with its process group, the problem named with the reason, and a fresh
    worker takes the problems left. A worker that dies names its problem likewise."""
    import subprocess, tempfile
    cfg = kb_manifest(opts.kb_manifest)
    devices = [int(d) for d in opts.devices.split(",")] if opts.devices else [0]
    todo = [p for p in cfg["problems"] if not kb_warmed(p)]
    if len(todo) < len(cfg["problems"]):
        print(f"[warm] {len(cfg['problems']) - len(todo)} of {len(cfg['problems'])} problems warmed already",
              file=sys.stderr, flush=True)
    bound = int(cfg.get("problem_timeout", 900))
    queue = [p["key"] for p in todo]
    started = 0

    def report(key, err, secs):
        print(f"[warm] {key}: " + (f"compiled in {secs:.1f} s" if not err else f"{err} ({secs:.1f} s)"),
              file=sys.stderr, flush=True)

    def give(w):
        """The worker's next problem, or its end (stdin closed) when none is left."""
        w["key"], w["t0"] = (queue.pop(0) if queue else None), time.monotonic()
        try:
            if w["key"] is None:
                w["p"].stdin.close()
            else:
                w["p"].stdin.write((w["key"] + "\n").encode())
                w["p"].stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: its end is seen below, and its problem named

    def start(slot):
        nonlocal started
        started += 1
        err = tempfile.TemporaryFile()
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--kb-manifest", opts.kb_manifest,
                              "--kb-warm-worker", "--device", str(devices[slot % len(devices)])],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        os.set_blocking(p.stdout.fileno(), False)
        w = {"p": p, "err": err, "buf": b"", "slot": slot}
        give(w)
        return w

    def answers(w):
        """The worker's finished problems so far: each reported, and the next handed out."""
        while True:
            try:
                chunk = os.read(w["p"].stdout.fileno(), 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                return
            w["buf"] += chunk
            while b"\n" in w["buf"]:
                line, w["buf"] = w["buf"].split(b"\n", 1)
                try:
                    a = json.loads(line)
                except ValueError:
                    continue
                if a.get("key") == w["key"]:
                    report(a["key"], a.get("error"), a.get("seconds", 0.0))
                    give(w)

    workers = [start(i) for i in range(min(max(1, opts.jobs), len(queue)))]
    while any(workers):
        time.sleep(0.2)
        for i, w in enumerate(workers):
            if w is None:
                continue
            answers(w)
            p = w["p"]
            late = w["key"] is not None and p.poll() is None and time.monotonic() - w["t0"] > bound
            if late:
                kb_kill_group(p)
            if p.poll() is None and not late:
                continue
            p.wait()
            answers(w)  # what it finished before it ended
            if w["key"] is not None:
                report(w["key"], f"did not finish within {bound} s (killed)" if late else
                       (kb_last_line(w["err"]) or f"the warm-up exited with status {p.returncode}"),
                       time.monotonic() - w["t0"])
            w["err"].close()
            workers[i] = start(w["slot"]) if queue else None
    if todo:
        print(f"[warm] {len(todo)} problems in {started} worker processes", file=sys.stderr, flush=True)


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
    ap.add_argument("--kb-manifest", help="KernelBench problems and their exported models (JSON; kernelskill bench)")
    ap.add_argument("--kb-measure", action="store_true", help="measure the manifest's problems on --device")
    ap.add_argument("--kb-out", help="append one JSON line per measured problem here")
    ap.add_argument("--kb-cpu-check", action="store_true",
                    help="with --kb-measure: correctness only, on the CPU, no timing (for tests)")
    ap.add_argument("--kb-prebuild", action="store_true", help="build the manifest's models in --jobs processes")
    ap.add_argument("--kb-warm", action="store_true", help="torch.compile the manifest's Models once, --jobs processes")
    ap.add_argument("--devices", help="GPUs for --kb-warm, comma-separated (default 0)")
    ap.add_argument("--kb-current", help="with --kb-measure: keep the problem and phase being measured here (JSON)")
    ap.add_argument("--kb-build-model", help="build this one model's extension under --kb-builds (a bounded child)")
    ap.add_argument("--kb-builds", help="with --kb-build-model: the builds directory")
    ap.add_argument("--kb-warm-worker", action="store_true",
                    help="with --kb-manifest: warm the problems whose keys arrive on stdin, on --device (kb_warm's child)")
    opts = ap.parse_args()
    if opts.kb_build_model:
        if not opts.kb_builds:
            ap.error("--kb-build-model needs --kb-builds")
        kb_build_model(opts)
        return
    if opts.kb_manifest:
        # One inductor cache for the warm-ups and the measuring processes (set before
        # torch is imported; the worker processes inherit it), unless the user named one.
        inductor = kb_manifest(opts.kb_manifest).get("inductor")
        if inductor:
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", inductor)
        if opts.kb_warm_worker:
            kb_warm_worker(opts)
        elif opts.kb_prebuild:
            kb_prebuild(opts)
        elif opts.kb_warm:
            kb_warm(opts)
        elif opts.kb_measure and opts.kb_out:
            kb_measure(opts)
        else:
            ap.error("--kb-manifest needs --kb-prebuild, --kb-warm, or --kb-measure with --kb-out")
        return
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
