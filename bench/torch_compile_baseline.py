#!/usr/bin/env python3
"""torch.compile's speedup over eager PyTorch on the same tasks, the bar that the rules
coder's geometric-mean speedup (bench/rules_review.sh) is measured against.

    python3 bench/torch_compile_baseline.py [TASK.yaml ...]   (default: examples/tasks and bench/suites/ops)

Each task's TorchScript source is also Python, so it is exec'd as the eager function
and handed to torch.compile (default mode). Inputs follow the task's shapes at its
default size (values: normal or uniform as declared; timing does not depend on them).
Timing as the reviewer does it: CUDA events around one call, L2 flushed before each
run, warm-up, median of 20. Needs a GPU and PyTorch >= 2.
"""
import glob, math, os, statistics, sys, types

import torch
import yaml

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
paths = sys.argv[1:] or sorted(glob.glob(f"{root}/examples/tasks/*.yaml")) + sorted(glob.glob(f"{root}/bench/suites/ops/*.yaml"))
dev = torch.device("cuda")
flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev)

# `torch` as TorchScript sees it: aten ops such as torch.hardswish or torch.linear live
# in torch._C._nn or torch.nn.functional in Python. A real module, so that
# torch.compile traces through it like through torch itself.
torch_names = types.ModuleType("torch_names")
for mod in (torch.nn.functional, torch._C._nn, torch):
    torch_names.__dict__.update({k: getattr(mod, k) for k in dir(mod) if not k.startswith("__")})

def make(t):
    init = t.get("init", {"kind": "normal"})
    if isinstance(init, str): init = {"kind": init}
    shape, kind = t["shape"], init.get("kind", "normal")
    if kind == "uniform":
        return torch.empty(shape, device=dev).uniform_(init.get("low", 0), init.get("high", 1))
    if kind == "kaiming_uniform":
        b = 1 / math.sqrt(math.prod(shape[1:]))
        return torch.empty(shape, device=dev).uniform_(-b, b)
    return torch.randn(shape, device=dev) * init.get("std", 1) + init.get("mean", 0)

def median_ms(fn, args, reps=20):
    for _ in range(3): fn(*args)
    times = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(*args); e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)

print(f"{'task':28} {'eager ms':>9} {'compile ms':>11} {'speedup':>8}")
speedups = []
with torch.no_grad():
    for p in paths:
        spec = yaml.safe_load(open(p))
        scope = {"torch": torch_names}
        exec(spec["reference"]["torchscript"], scope)
        forward = scope["forward"]
        args = [make(t) for t in spec["inputs"]] + [make(t) for t in spec.get("parameters", [])]
        try:
            eager = median_ms(forward, args)
            compiled = torch.compile(forward)
            comp = median_ms(compiled, args)
        except Exception as ex:  # one task's failure must not hide the others
            print(f"{spec['name']:28} failed: {str(ex).splitlines()[0][:120]}")
            continue
        speedups.append(eager / comp)
        print(f"{spec['name']:28} {eager:9.4f} {comp:11.4f} {eager / comp:8.3f}", flush=True)
        del args
        torch.cuda.empty_cache()
if speedups:
    print(f"\ntorch.compile geometric-mean speedup over eager: {math.exp(sum(map(math.log, speedups)) / len(speedups)):.3f} ({len(speedups)} tasks)")
