#!/usr/bin/env python3
"""How long a PyTorch load_inline build of a kernel takes: the third column of the
compile-latency table (beside ks-compile-latency's NVRTC and nvcc -cubin).

    python3 bench/reviewer/load_inline_latency.py [--reps N] MODEL.py ...

Each MODEL.py is a `kernelskill export` file: the kernel's device code plus the
generated launcher, built by its load_extension() with
torch.utils.cpp_extension.load_inline (nvcc for the .cu, the host compiler for the
pybind module, a link, the import). Each repetition runs in a fresh Python process with a
fresh, empty build directory, so nothing is cached (torch's own import is not counted).
Prints a Markdown table: median and min over the repetitions, in seconds.
--parallel builds all the files at once (one fresh process each) instead of one after
the other: each build then shares the machine with the others (say so with the numbers).
"""
import os, statistics, subprocess, sys, tempfile

CHILD = r'''
import importlib.util, sys, time
import torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
t0 = time.perf_counter()
m.load_extension(build_directory=sys.argv[2])
print(time.perf_counter() - t0)
'''

def build(path, d):
    return subprocess.Popen([sys.executable, "-c", CHILD, path, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(p):
    out, err = p.communicate()
    if p.returncode != 0:
        return None, (err.strip().splitlines()[-1][:200] if err.strip() else str(p.returncode))
    return float(out.strip().splitlines()[-1]), None


def main():
    args = sys.argv[1:]
    reps, parallel = 2, False
    while args and args[0].startswith("--"):
        if args[0] == "--reps":
            reps, args = int(args[1]), args[2:]
        elif args[0] == "--parallel":
            parallel, args = True, args[1:]
        else:
            sys.exit(f"unknown option {args[0]}")
    print("| kernel (exported module) | load_inline median s | load_inline min s |")
    print("| --- | ---: | ---: |")
    times = {p: [] for p in args}
    errors = {}
    for _ in range(reps):
        dirs = {p: tempfile.mkdtemp(prefix="ks_load_inline_") for p in args}
        if parallel:
            procs = {p: build(p, dirs[p]) for p in args}
            outcomes = {p: result(q) for p, q in procs.items()}
        else:
            outcomes = {p: result(build(p, dirs[p])) for p in args}
        for p, (t, err) in outcomes.items():
            if t is None:
                errors[p] = err
            else:
                times[p].append(t)
    for p in args:
        name = os.path.basename(p)[:-3]
        if times[p]:
            print(f"| {name} | {statistics.median(times[p]):.1f} | {min(times[p]):.1f} |", flush=True)
        else:
            print(f"| {name} | failed: {errors.get(p)} | |", flush=True)


if __name__ == "__main__":
    main()
