#!/usr/bin/env python3
"""Where the time goes, kernel by kernel: a KernelBench problem's Model in eager and
under torch.compile against exported ModelNew files, on one GPU.

    python3 bench/kernelbench/profile.py --problem P.py --model seed-0=M0.py [--model seed-1=M1.py]
                                       [--reps 10] [--builds DIR] [--out R.json]

Each is built and seeded as KernelBench's evaluator does (cli/side_by_side.py's kb_*
helpers), checked once against eager at 1e-4 on the problem's own inputs, timed with CUDA
events (L2 flushed, median of --reps), then run --reps more times under torch.profiler:
the table lists every CUDA kernel and memory copy with its calls per forward and its mean
time, so that a gap to torch.compile can be read as the kernels that make it (a layout
copy, the convolution's algorithm, an epilogue's pass). Diagnostics only: the numbers
that the benchmarks report come from side_by_side.py.
"""
import argparse, json, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side as sbs  # noqa: E402


def timed(torch, fn, xs, reps, flush):
    for _ in range(3):
        fn(*xs)
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*xs)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def kernels(torch, fn, xs, reps):
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn(*xs)
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        r = rows.setdefault(e.name, [0, 0.0])
        r[0] += 1
        r[1] += e.device_time if hasattr(e, "device_time") else e.cuda_time
    out = [{"kernel": k, "calls": c / reps, "us_per_forward": t / reps} for k, (c, t) in rows.items()]
    return sorted(out, key=lambda r: -r["us_per_forward"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", required=True)
    ap.add_argument("--model", action="append", default=[], help="LABEL=FILE.py (an exported ModelNew)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--builds", default="kb-profile-builds")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--build-only", action="store_true", help="build the models' extensions and stop")
    ap.add_argument("--out")
    args = ap.parse_args()
    import torch
    dev = torch.device("cuda")
    problem = sbs.kb_load_problem(args.problem)
    mods = {}
    for spec in args.model:
        label, _, path = spec.partition("=")
        if not path:
            sys.exit(f"--model {spec}: expected LABEL=FILE.py")
        mods[label], _ = sbs.kb_build({"path": path}, args.builds, dev)
    if args.build_only:
        return    model, ours, errors = sbs.kb_construct(torch, problem, mods, 42, dev)
    for label, err in errors.items():
        print(f"{label}: {err}")
    xs = sbs.kb_inputs(torch, problem, 42, dev)
    fns = {"eager": model}
    if not args.no_compile:
        fns["compile"] = torch.compile(model)
    fns.update(ours)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    report = {"problem": os.path.basename(args.problem), "runs": {}}
    with torch.no_grad():
        ref = model(*xs)
        for label, fn in fns.items():
            run = {}
            try:
                out = fn(*xs)
                run["correct_1e-4"] = sbs.kb_check(torch, ref, out, 1e-4)
                run["max_abs_error"] = sbs.kb_max_abs_error(torch, ref, out)
                del out
                run["median_ms"] = timed(torch, fn, xs, args.reps, flush)
                run["kernels"] = kernels(torch, fn, xs, args.reps)
            except Exception as ex:
                run["error"] = sbs.kb_first_line(ex)
            report["runs"][label] = run
            print(f"== {report['problem']} {label}: " +
                  (run["error"] if "error" in run else
                   f"{run['median_ms']:.3f} ms, correct {run['correct_1e-4']} (max err {run['max_abs_error']:.2e})"))
            for k in run.get("kernels", [])[:12]:
                print(f"   {k['us_per_forward']:9.1f} us  x{k['calls']:.0f}  {k['kernel'][:110]}")
            sys.stdout.flush()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
