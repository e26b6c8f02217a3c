#!/usr/bin/env python3
"""Question: at odd sizes (K, N not multiples of 4), does the 3xTF32 product that the
rules coder writes (coder/rules/split_tf32.hpp) still beat eager's FP32 SGEMM, and what
does each padding buy? (Issue 46: 12 of 16 level-2 GEMM + epilogue problems ran at
0.68-0.99x of eager at odd sizes, 1.86x at the published ones.)

Run as it stands on one H100 (2026-12-06, PyTorch 2.11; the product alone, ms; the
split here is torch ops, so the whole times are not the rules coder's):

    op      M K N               eager   k       k4      k4n4    kt (mm: B transposed)
    linear  1024 8192 8192      2.682   0.958
    linear  1023 8191 8191      2.717   3.204   2.931   0.965
    linear  1023 8192 8191      2.686   2.926           0.951
    linear  16383 1023 1023     0.715   0.825   0.763   0.308
    linear  255 12289 12287     2.058   1.808   1.958   0.782   (k4n4 missed 1e-4)
    mm      1023 4095 4093      0.703   0.760   0.738   0.255   0.739

Padding K and N (the output's rows) brings the product back to its aligned time at
every odd size; K alone, or B transposed without padded output rows, does not. Three
unaligned thirds (3 x 0.96-3.2 ms of work in one call) lose to SGEMM; aligned ones win
2.8x at 1023 x 8191 x 8191. At K = 12289 the split missed 1e-4 once: the dropped
small x small term grows with sqrt(K) (kernelskill bench saw it on 3 of 16 odd level-2
GEMMs at K = 8191, 33, 70 and 76: a few hundred of 8.4 M outputs near zero off by
up to 3e-4).

What a first, simpler probe found (one H100, 2026-12-06,
PyTorch 2.11, linear without bias, ms a product, TF32 on for the tf32 columns):

    M K N            fp32    tf32   tf32 K padded   tf32 K and N padded
    128 4096 4096    0.102   0.031  0.030           0.031
    127 4095 4093    0.102   0.055  0.053           0.030
    1024 8191 8191   2.690   1.021  1.036           0.339
    1023 8191 8191   2.807   1.029  1.050           0.339
    16384 1024 1024  0.707   0.107  0.107           0.108
    16383 1023 1023  0.721   0.292  0.292           0.107
    255 12289 12287  1.752   0.664  0.691           0.273

So the cliff is the output's leading dimension N: padding K alone buys nothing, K and N
together bring the TF32 product back to its aligned speed (3x at 8191), and three
unaligned TF32 products (3 x 1.03 ms) lose to eager's SGEMM (2.69 ms) while three
aligned ones (1.02 ms) beat it 2.6x: what 12 of 16 level-2 GEMMs at odd sizes showed.
Padding the output rows (split_tf32_layout::pad_n) is the change that pays; run this
probe to confirm it with the split's own layout and the bias.

For each linear y = x W^T + b (M, K, N) and mm C = A B, in PyTorch alone:
- eager: FP32 SGEMM (TF32 off, ATen's default);
- split: the operands split into TF32 big + small parts, three thirds along K
  ([big | big | small] and [big | small | big]), one TF32 product over 3K, with
  * k: each third K as it is (what the rules coder wrote before: at odd K the
    product's leading dims 3K are not 16-byte aligned),
  * k4: each third K rounded up to a multiple of 4, zeros after (what it writes now),
  * k4n4: K and N both rounded up (linear: the weight's rows and the bias padded, the
    output [M, round_up(N, 4)]: what the rules coder writes where only elementwise
    kernels read the product, which read it by row and column; here narrowed as a
    view; mm: B's columns padded);
  each timed whole (split + product) and as the product alone (the split here is
  torch ops: cat, padding, several passes, slower than the rules coder's one kernel per
  operand; the _product times are the ones to compare across paddings);
- mm at odd N: B's leading dim N is unaligned; the rules coder splits B transposed
  ([N, 3K], linear's weight layout) and runs linear (the kt row: K padded, B
  transposed; a batched B stays SGEMM). k4 beside it is B split as it lies.
Timed with CUDA events after an L2 flush, alternated, median of REPS (as
cli/side_by_side.py times); each split result checked against eager's at 1e-4.

  python3 bench/probes/tf32_odd_probe.py [--reps 20]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli"))
import side_by_side as sbs  # noqa: E402


def up(v, m=4):
    return (v + m - 1) // m * m


def tf32(torch, x):
    """The nearest TF32 value of each element (ties away from zero), as ks_tf32."""
    u = x.view(torch.int32)
    finite = (u & 0x7f800000) != 0x7f800000
    r = torch.where(finite, (u + 0x1000) & -8192, u)
    return r.view(torch.float32)


def split(torch, x, dim, second, k_pad):
    """x split three times along `dim`, each third padded with zeros to k_pad."""
    big = tf32(torch, x)
    small = tf32(torch, x - big)
    parts = (big, small, big) if second else (big, big, small)
    if k_pad != x.shape[dim]:
        pad = list(x.shape)
        pad[dim] = k_pad - x.shape[dim]
        z = torch.zeros(pad, device=x.device, dtype=x.dtype)
        parts = tuple(torch.cat((p, z), dim=dim) for p in parts)
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
    shapes = [("linear", 128, 4096, 4096), ("linear", 127, 4095, 4093), ("linear", 129, 1023, 511),
              ("linear", 1024, 8192, 8192), ("linear", 1023, 8191, 8191), ("linear", 16384, 1024, 1024),
              ("linear", 16383, 1023, 1023), ("linear", 255, 12289, 12287), ("linear", 1023, 8192, 8191),
              ("mm", 1024, 4096, 4096), ("mm", 1023, 4095, 4093), ("mm", 1023, 4096, 4093)]
    for op, M, K, N in shapes:
        x = torch.randn(M, K, device=dev, generator=g)
        w_shape = (N, K) if op == "linear" else (K, N)
        w = torch.randn(w_shape, device=dev, generator=g) / K ** 0.5
        # linear with its bias (as level 2's nn.Linear, and as the plan runs it: cuBLASLt's
        # bias epilogue), padded with zeros where the weight's rows are.
        bias = torch.randn(up(N), device=dev, generator=g) * 0.01
        bias[N:] = 0

        def fp32(a, b):
            if op == "mm":
                return torch.mm(a, b)
            return torch.nn.functional.linear(a, b, bias[:b.shape[0]])
        b_dim = 1 if op == "linear" else 0

        def tf32_product(a3, b3):
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return fp32(a3, b3)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False

        def variant(k_pad, n_pad):
            def split_only(x, w):
                b = w
                if n_pad != N:
                    shape = (n_pad, K) if op == "linear" else (K, n_pad)
                    b = torch.zeros(shape, device=dev)
                    (b[:N] if op == "linear" else b[:, :N]).copy_(w)
                return split(torch, x, 1, False, k_pad), split(torch, b, b_dim, True, k_pad)

            def whole(x, w):
                y = tf32_product(*split_only(x, w))
                return y[:, :N] if n_pad != N else y
            return split_only, whole

        ref = fp32(x, w)
        fns = {"eager": (fp32, (x, w))}
        checks = {}
        if op == "mm" and N % 4:
            def split_t(x, w):
                return split(torch, x, 1, False, up(K)), split(torch, w.t().contiguous(), 1, True, up(K))

            def linear_t(a3, bt3):
                torch.backends.cuda.matmul.allow_tf32 = True
                try:
                    return torch.nn.functional.linear(a3, bt3)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = False

            def whole_t(x, w):
                return linear_t(*split_t(x, w))
            fns["kt"] = (whole_t, (x, w))
            fns["kt_product"] = (linear_t, split_t(x, w))
            checks["kt"] = bool(torch.allclose(whole_t(x, w), ref, atol=1e-4, rtol=1e-4))
        for name, kp, np_ in (("k", K, N), ("k4", up(K), N), ("k4n4", up(K), up(N))):
            if name != "k" and (kp, np_) == (K, N) or name == "k4n4" and np_ == N:
                continue  # the same as a row before it
            split_only, whole = variant(kp, np_)
            a3, b3 = split_only(x, w)
            fns[name] = (whole, (x, w))
            fns[name + "_product"] = (tf32_product, (a3, b3))
            checks[name] = bool(torch.allclose(whole(x, w), ref, atol=1e-4, rtol=1e-4))
        times = sbs.time_alternated(torch, events_ms, fns, opts.reps)
        med = {k: round(statistics.median(v), 4) for k, v in times.items()}
        row = {"op": op, "M": M, "K": K, "N": N, "ms": med,
               "speedup": {k: round(med["eager"] / med[k], 3) for k in checks},
               "passes_1e-4": checks}
        print(json.dumps(row), flush=True)
        del x, w, ref, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
