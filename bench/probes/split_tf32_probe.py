#!/usr/bin/env python3
"""Split-precision (3xTF32) products against cuBLAS's FP32 SGEMM, in PyTorch alone
(coder/rules/templates/split_tf32.hpp is what the rules coder writes).

Conclusion (H200, 2026-12-02; docs/benchmarks-log.md, fifth run): the TF32 product over
3K took 0.94 ms where cuBLAS's SGEMM took 2.68 ms (4096^3), and 0.93 against 2.70 ms
(linear 1024 x 8192 x 8192); its error against float64 was 2.5e-4 at outputs of scale 1
(K = 4096), against SGEMM's 1.5e-5 and plain TF32's 1.7e-3 (the tensor cores truncate
as they accumulate, so the error grows with K). With KernelBench's positive inputs the
split passes 1e-4; with K = 8192 and signed outputs of scale ~90 no order of the sum
other than cuBLAS's stays within 1e-4, so the review fails the split there and the
plainest seed (SGEMM) is kept. The rules coder writes 3xTF32 for float32 products bound
by arithmetic.

For each shape: the operands split as the rules coder's kernels split them (big = the
nearest TF32 value, small = the nearest to the rest; [big | big | small] and
[big | small | big] along K), one product over 3K with TF32 allowed for that call; timed
against eager's FP32 product (TF32 off, ATen's default) with CUDA events after an L2
flush, alternated, median of REPS; the split's own time apart; the largest error of
each against a float64 product, and whether the split passes KernelBench's check
(1e-4) against eager's result.

  python3 bench/probes/split_tf32_probe.py [--reps 20]
"""
import argparse
import json
import statistics
import os
import sys

# cli/side_by_side.py (the measurement `kernelskill bench` embeds) times as the bench does.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli"))
import side_by_side as sbs  # noqa: E402


def tf32(torch, x):
    """The nearest TF32 value of each element (ties away from zero), as ks_tf32."""
    u = x.view(torch.int32)
    finite = (u & 0x7f800000) != 0x7f800000
    r = torch.where(finite, (u + 0x1000) & -8192, u)
    return r.view(torch.float32)


def split(torch, x, dim, second):
    big = tf32(torch, x)
    small = tf32(torch, x - big)
    parts = (big, small, big) if second else (big, big, small)
    return torch.cat(parts, dim=dim)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    opts = ap.parse_args()
    import torch
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    events_ms = sbs.events_timer(torch, dev)
    g = torch.Generator(device=dev).manual_seed(0)
    # (name, A shape, B shape, op): KernelBench's published GEMM sizes and one other each.
    shapes = [("square 4096", (4096, 4096), (4096, 4096), "mm"),
              ("square 3000", (3000, 3000), (3000, 3000), "mm"),
              ("linear 1024x8192x8192", (1024, 8192), (8192, 8192), "linear"),
              ("linear 512x4096x2048", (512, 4096), (2048, 4096), "linear"),
              ("bmm 128x512x1024x2048", (128, 512, 1024), (128, 1024, 2048), "bmm")]
    for name, sa, sb, op in shapes:
        a = torch.randn(sa, device=dev, generator=g)
        b = torch.randn(sb, device=dev, generator=g) / sa[-1] ** 0.5
        fp32 = {"mm": torch.mm, "bmm": torch.bmm, "linear": torch.nn.functional.linear}[op]
        b_dim = -1 if op == "linear" else -2

        def split_only(a, b):
            return split(torch, a, -1, False), split(torch, b, b_dim, True)

        def tf32_product(a3, b3):
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return fp32(a3, b3)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False

        def ours(a, b):
            return tf32_product(*split_only(a, b))

        ref = fp32(a, b)
        got = ours(a, b)
        exact = fp32(a.double(), b.double())
        a3, b3 = split_only(a, b)
        times = sbs.time_alternated(torch, events_ms, {"eager": (fp32, (a, b)), "ours": (ours, (a, b)),
                                                       "split": (split_only, (a, b)),
                                                       "product": (tf32_product, (a3, b3))}, opts.reps)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(json.dumps({
            "shape": name,
            "eager_ms": round(med["eager"], 4), "ours_ms": round(med["ours"], 4),
            "split_ms": round(med["split"], 4), "tf32_product_ms": round(med["product"], 4),
            "speedup": round(med["eager"] / med["ours"], 3),
            "eager_err": float((ref.double() - exact).abs().max()),
            "ours_err": float((got.double() - exact).abs().max()),
            "plain_tf32_err": float((tf32_product(a, b).double() - exact).abs().max()),
            "passes_1e-4": bool(torch.allclose(got, ref, atol=1e-4, rtol=1e-4)),
        }), flush=True)
        del a, b, a3, b3, ref, got, exact
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
