#!/usr/bin/env python3
"""Where an exported ModelNew's time goes, beside the problem's own Model (the side by
side found ours ~80 us slower than the run's reviews on every problem).

Conclusion (H200, 2026-12-02; docs/benchmarks-log.md, second run): the Python side of
ModelNew (argument binding, the parameters' lookup) cost 15-35 us a call and the
launcher's dispatcher steps 35-45 us each (schema parsing, the boxed call, a copy of
the op's result into its declared buffer). On 3 ms problems that host time hides
behind the timed call's L2 flush; on 12_Matmul_with_diagonal_matrices_ (a 0.035 ms
kernel) it does not. Since then ModelNew's usual call skips inspect's binding and a
library step's result is taken as its buffer instead of copied (gpu/result_adoption.hpp).

For each named problem of a `kernelskill bench` directory (its problem copy, its exported
model, the model's build under measure/build), on the GPU:
  - eager_ms, ours_ms, ext_ms: one call timed with CUDA events after an L2 flush, as
    cli/side_by_side.py times (median of REPS): the Model, ModelNew.forward, and the
    extension's ks_forward called directly on the same tensors (no Python binding);
  - *_host_us: the host's time per call, back to back without a sync (what the GPU waits
    for when the call is timed from an idle GPU);
  - *_gpu_ms: the device time of the kernels and copies of one call (torch.profiler);
  - *_sync_ms: one call timed with CUDA events right after a synchronize (no flush to
    hide the host's time behind).
One JSON line per problem on stdout.

  python3 bench/probes/modelnew_overhead.py BENCH_DIR NAME... [--reps 20] [--variant full]
"""
import argparse
import json
import os
import statistics
import sys
import time

# cli/side_by_side.py (the measurement `kernelskill bench` embeds) times as the bench does.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli"))
import side_by_side as sbs  # noqa: E402


def find_problem(bench, name):
    for level in sorted(os.listdir(os.path.join(bench, "problems"))):
        p = os.path.join(bench, "problems", level, name + ".py")
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{bench}/problems/*/{name}.py")


def host_us(torch, fn, args, n=10):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def gpu_ms(torch, fn, args, n=3):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn(*args)
        torch.cuda.synchronize()
    total, names = 0.0, {}
    for ev in prof.events():
        t = getattr(ev, "device_time", None)
        if t is None:
            t = getattr(ev, "cuda_time", 0.0)
        if getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type) and t:
            total += t
            names[ev.name[:60]] = names.get(ev.name[:60], 0.0) + t / n / 1000
    return total / n / 1000, dict(sorted(names.items(), key=lambda kv: -kv[1])[:4])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--variant", default="full")
    a = ap.parse_args()
    import torch
    dev = torch.device("cuda")
    events_ms = sbs.events_timer(torch, dev)
    sync_ms = sbs.events_timer(torch, dev, flush_l2=False)
    builds = os.path.join(a.bench, "measure", "build")
    for name in a.names:
        row = {"name": name}
        try:
            model_path = os.path.join(a.bench, "variants", a.variant, "models", name + ".py")
            mod, _ = sbs.kb_build({"path": model_path}, builds, dev)
            problem = sbs.kb_load_problem(find_problem(a.bench, name))
            with torch.no_grad():
                model, ours, errors = sbs.kb_construct(torch, problem, {"v": mod}, 42, dev)
                if errors:
                    raise RuntimeError(errors["v"])
                m = ours["v"]
                xs = sbs.kb_inputs(torch, problem, 42, dev)
                tensors = m._kernel_tensors(xs, {})
                ext = mod.load_extension()
                fns = {"eager": (model, xs), "ours": (m, xs),
                       "ext": (lambda *_: ext.ks_forward(tensors, False), xs)}
                times = sbs.time_alternated(torch, events_ms, fns, a.reps)
                for k, (fn, args) in fns.items():
                    row[k + "_ms"] = round(statistics.median(times[k]), 4)
                    row[k + "_host_us"] = round(host_us(torch, fn, args), 1)
                    row[k + "_sync_ms"] = round(statistics.median(sync_ms(fn, args) for _ in range(5)), 4)
                    row[k + "_gpu_ms"], row[k + "_top"] = gpu_ms(torch, fn, args)
                    row[k + "_gpu_ms"] = round(row[k + "_gpu_ms"], 4)
            del model, ours, xs, tensors
        except Exception as ex:
            row["error"] = sbs.kb_first_line(ex)
        torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
