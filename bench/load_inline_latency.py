#!/usr/bin/env python3
"""How long a PyTorch load_inline build of a kernel takes: the third column of the
compile-latency table (beside ks-compile-latency's NVRTC and nvcc -cubin).

    python3 bench/load_inline_latency.py [--reps N] MODEL.py ...

Each MODEL.py is a `kernelskill export` file: the kernel's device code plus the
generated launcher, built by its load_extension() with
torch.utils.cpp_extension.load_inline (nvcc for the .cu, the host compiler for the
pybind module, a link, the import). Each repetition runs in a fresh Python process with a
fresh, empty build directory, so nothing is cached (torch's own import is not counted).
Prints a Markdown table: median and min over the repetitions, in seconds.
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

def main():
    args = sys.argv[1:]
    reps = 2
    if args[:1] == ["--reps"]:
        reps, args = int(args[1]), args[2:]
    print("| kernel (exported module) | load_inline median s | load_inline min s |")
    print("| --- | ---: | ---: |")
    for path in args:
        times = []
        for _ in range(reps):
            with tempfile.TemporaryDirectory(prefix="ks_load_inline_") as d:
                r = subprocess.run([sys.executable, "-c", CHILD, path, d], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"| {os.path.basename(path)} | failed: {r.stderr.strip().splitlines()[-1][:200] if r.stderr.strip() else r.returncode} | |", flush=True)
                    break
                times.append(float(r.stdout.strip().splitlines()[-1]))
        if times:
            print(f"| {os.path.basename(path)[:-3]} | {statistics.median(times):.1f} | {min(times):.1f} |", flush=True)

if __name__ == "__main__":
    main()
