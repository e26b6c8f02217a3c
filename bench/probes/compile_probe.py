#!/usr/bin/env python3
"""What torch.compile runs for a KernelBench problem, and how its library calls time
against eager's (on level 2's convolutions compile is ~2x eager while its epilogue
fusion alone would explain far less).

Conclusion (H200, 2026-12-02, PyTorch 2.11, cuDNN 9.19; docs/benchmarks-log.md,
fourth run): eager's fp32 convolutions already run TF32 tensor-core kernels and stay
within 1e-4. Around the convolution eager pays cuDNN's NCHW->NHWC conversion of the input,
often an NHWC->NCHW one of the output, and a separate bias add over the whole output
(25_Conv2d_Min_Tanh_Tanh: conversions 0.41 + 1.14 ms, the bias 1.64 ms, the convolution
1.55 ms); inductor calls the convolution with bias=None on channels-last operands and
adds the bias in its fused epilogue. cudnn.benchmark changes nothing on these shapes.
The rules coder now adds a convolution's bias in the kernel that reads the result
(coder/rules/passes/conv_bias.hpp); the channels-last layout is what is left.

For each problem file, on the GPU (seed 42 for the weights as KernelBench's evaluator
draws them, the problem's own get_inputs):
  - eager and torch.compile of the problem's Model, timed as cli/side_by_side.py times
    (CUDA events after an L2 flush, alternated, median of REPS);
  - for each convolution / linear module, the module alone on the input it saw in the
    eager call, under cuDNN's defaults, with cudnn.benchmark, with TF32 off, and (2-d
    and 3-d convolutions, transposed ones too) with input and weight channels-last
    (converted outside the timing), with that result's largest difference from the
    default's and whether it is within KernelBench's 1e-4;
  - the kernels of one compiled call and of one eager call (torch.profiler: name and
    device time), and inductor's generated code (run_and_get_code).
Writes OUT/NAME.code.py (inductor's code) and one JSON line per problem on stdout.

  python3 bench/probes/compile_probe.py [--reps 20] [--out DIR] PROBLEM.py...
"""
import argparse
import copy
import json
import os
import statistics
import sys

# cli/side_by_side.py (the measurement `kernelskill bench` embeds) times as the bench does.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli"))
import side_by_side as sbs  # noqa: E402


def kernels(torch, fn, args):
    """[(name, device ms)] of one call, largest first."""
    from torch.profiler import ProfilerActivity, profile
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    out = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0.0)
        if t and getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type):
            out[ev.key] = out.get(ev.key, 0.0) + t / 1000.0
    return sorted(([k[:160], round(v, 4)] for k, v in out.items()), key=lambda kv: -kv[1])


def median_ms(torch, events_ms, fns, reps):
    times = sbs.time_alternated(torch, events_ms, fns, reps)
    return {k: round(statistics.median(v), 4) for k, v in times.items()}


def library_modules(torch, model):
    kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d,
             torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d, torch.nn.Linear)
    return [(n, m) for n, m in model.named_modules() if isinstance(m, kinds)]


def probe(torch, dev, path, reps, out_dir):
    name = os.path.basename(path)[:-3]
    mod = sbs.import_model(path)
    torch.manual_seed(42)
    model = mod.Model(*mod.get_init_inputs()).to(dev)
    torch.manual_seed(42)
    inputs = [x.to(dev) if hasattr(x, "to") else x for x in mod.get_inputs()]
    row = {"problem": name}
    seen = {}
    def keep_input(name):
        def hook(module, args, out):
            seen.setdefault(name, args[0])  # returns None: the output stays the module's
        return hook
    hooks = [m.register_forward_hook(keep_input(n)) for n, m in library_modules(torch, model)]
    with torch.no_grad():
        model(*inputs)
    for h in hooks:
        h.remove()
    compiled = torch.compile(model)
    events_ms = sbs.events_timer(torch, dev)
    with torch.no_grad():
        from torch._inductor.utils import run_and_get_code
        _, codes = run_and_get_code(compiled, *inputs)
        if out_dir:
            with open(os.path.join(out_dir, name + ".code.py"), "w") as f:
                f.write("\n\n# ----\n".join(codes))
        row["model_ms"] = median_ms(torch, events_ms, {"eager": (model, inputs), "compile": (compiled, inputs)}, reps)
        row["eager_kernels"] = kernels(torch, model, inputs)[:8]
        row["compile_kernels"] = kernels(torch, compiled, inputs)[:8]
        row["modules"] = {}
        for n, m in library_modules(torch, model):
            if n not in seen:
                continue
            x = seen[n]
            r = {"input": list(x.shape)}
            fns = {"default": (m, [x])}
            conv = (torch.nn.Conv2d, torch.nn.ConvTranspose2d, torch.nn.Conv3d, torch.nn.ConvTranspose3d)
            if x.dim() in (4, 5) and isinstance(m, conv):
                # The same module on channels-last operands (converted outside the timing),
                # and how far its result lies from the default's: cuDNN's NHWC algorithm
                # is another TF32 algorithm, and KernelBench checks at 1e-4.
                fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
                m_cl = copy.deepcopy(m).to(memory_format=fmt)
                x_cl = x.contiguous(memory_format=fmt)
                fns["channels_last"] = (m_cl, [x_cl])
                with torch.no_grad():
                    want, got = m(x), m_cl(x_cl)
                r["channels_last_max_abs_error"] = float((got - want).abs().max())
                r["channels_last_within_1e-4"] = bool(torch.allclose(got, want, atol=1e-4, rtol=1e-4))
            r["ms"] = median_ms(torch, events_ms, fns, reps)
            for flag, setting in (("cudnn_benchmark", ("benchmark", True)), ("no_tf32", ("allow_tf32", False))):
                old = getattr(torch.backends.cudnn, setting[0])
                setattr(torch.backends.cudnn, setting[0], setting[1])
                try:
                    r["ms"][flag] = median_ms(torch, events_ms, {flag: (m, [x])}, reps)[flag]
                    r[flag + "_kernels"] = kernels(torch, m, [x])[:3]
                finally:
                    setattr(torch.backends.cudnn, setting[0], old)
            r["default_kernels"] = kernels(torch, m, [x])[:3]
            row["modules"][n] = r
    print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default="")
    opts = ap.parse_args()
    if opts.out:  # inductor's code goes there: a missing folder failed every problem
        os.makedirs(opts.out, exist_ok=True)
    import torch
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    print(json.dumps({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                      "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                      "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32}), flush=True)
    for p in opts.problems:
        try:
            probe(torch, dev, p, opts.reps, opts.out)
        except Exception as ex:  # one problem's failure does not end the probe
            print(json.dumps({"problem": os.path.basename(p), "error": str(ex)[-500:]}), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
