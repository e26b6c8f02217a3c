#!/usr/bin/env python3
"""Question: why does the 3xTF32 product (coder/rules/templates/split_tf32.hpp) miss
1e-4 against eager's FP32 SGEMM at K = 8191 (issue 46: 33, 70 and 76 of level 2 at odd
sizes, a few hundred of 8.4 M outputs off by up to 3e-4), and which arrangement of the
same three TF32 products holds 1e-4 at what cost?

Run as it stands on one H100 (2026-12-06, PyTorch 2.11, 9f8a9c1's tree); the product
alone, ms; misses: outputs outside allclose(1e-4, 1e-4) of eager, raw / after a
training-mode batch norm over the batch; (the split here is torch's cat, unpadded at
odd sizes: its times at 1023 x 8191 x 8191 are not the rules coder's, which pads):

    M K N, inputs          variant            ms     max|d|    misses   bn max|d|  bn misses
    1024 8192 8192 rand    eager              2.699  -         0        -          0
                           tf32 (one pass)    0.355  5.3e-04   1.6 M    2.3e-03    5.7 M
                           split-bb-first     0.971  1.3e-04   0        3.1e-04    1580
                           split-cross-first  1.052  4.0e-05   0        9.5e-05    0
                           split-3-calls      1.210  4.0e-05   0        9.4e-05    0
                           split-k4           1.348  1.3e-05   0        4.9e-05    0
                           split-k16          1.453  9.5e-06   0        5.2e-05    0
    1023 8191 8191 rand    split-bb-first     3.187  1.4e-04   0        2.9e-04    1806
                           split-cross-first  3.186  4.3e-05   0        8.4e-05    0
    1024 8192 8192 randn   split-bb-first     0.974  2.6e-04   0        1.3e-04    0
                           split-cross-first  1.039  7.0e-05   0        5.9e-05    0
    255 12289 12287 rand   split-bb-first     1.826  4.5e-05   0        7.6e-05    0
                           split-cross-first  1.825  3.6e-05   0        7.8e-05    0
                           split-k16          1.911  3.9e-06   0        1.1e-05    0

The order is the fix: with the cross terms first the product's largest error against
eager drops 3.2-3.7x at K = 8191-8192 (as three separate calls summed in FP32, at 1.15x the
time), and after the batch norm of level 2's 33 no output misses 1e-4 where 1580-1806
did; the error against float64 drops alike, so it was the split's, not eager's.
Cutting K into chunks summed in FP32 (split-K) buys another 3x at 1.3-1.4x the time.
The cross-first product ran 1.04-1.08x slower than bb-first at the aligned size here
(same work, same layout); the bench's review timing of 33, 70 and 76 at odd sizes
(1.90-1.97x over eager) is that of the other split products. Since d818e4f the rules
coder writes the cross terms first.

For linear y = x W^T (x [M, K] as KernelBench's torch.rand, W [N, K] as nn.Linear's
default init, and the same with randn), in PyTorch alone:
- eager: FP32 SGEMM (TF32 off); its own error against a float64 product;
- tf32: one TF32 product of the unsplit operands (the floor the split must beat);
- split-bb-first: what the rules coder wrote before d818e4f, one TF32 product over 3K of
  [big | big | small] x [big | small | big]: the big x big third first, so the two small
  cross thirds are added to an accumulator that already holds the whole sum;
- split-cross-first: what it writes since, the same three thirds as
  [big | small | big] x [small | big | big]: the cross terms (2^-11 of the sum)
  accumulate while the accumulator is small;
- split-3-calls: three TF32 products summed in FP32 (cross terms first);
- split-kC: K cut into C chunks, each chunk's three thirds one batched TF32 product,
  the C partial sums added in FP32 (split-K by hand).
For each: the product's time (CUDA events, median of 20), the largest difference from
eager, how many outputs miss allclose(atol=1e-4, rtol=1e-4) against eager (KernelBench's
check), and the same after a training-mode batch norm over the batch (level 2's
33_Gemm_Scale_BatchNorm: dividing by each column's standard deviation, about 0.17
here, magnifies the product's error six times).

    python3 bench/probes/tf32_accuracy_probe.py [--sizes 1023x8191x8191,1024x8192x8192]
"""
import argparse
import statistics

import torch


def tf32(x):
    # nearest TF32 value, ties away from zero (coder/rules/cuda/split_tf32.cuh's ks_tf32)
    u = x.view(torch.int32)
    finite = (u & 0x7F800000) != 0x7F800000
    r = torch.where(finite, (u + 0x1000) & -8192, u)
    return r.view(torch.float32)


def split(x):
    big = tf32(x)
    return big, tf32(x - big)


def timed(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def batch_norm(y):
    m = y.mean(0, keepdim=True)
    v = y.var(0, unbiased=False, keepdim=True)
    return (y - m) / torch.sqrt(v + 1e-5)


def misses(got, want):
    bad = ~torch.isclose(got, want, atol=1e-4, rtol=1e-4)
    return int(bad.sum()), float((got - want).abs().max())


def variants(x, w):
    xb, xs = split(x)
    wb, ws = split(w)
    out = {}

    def eager():
        torch.backends.cuda.matmul.allow_tf32 = False
        return x @ w.t()

    out["eager"] = eager

    def plain():
        torch.backends.cuda.matmul.allow_tf32 = True
        return x @ w.t()

    out["tf32"] = plain
    a_bb = torch.cat([xb, xb, xs], 1)
    b_bb = torch.cat([wb, ws, wb], 1)
    a_cf = torch.cat([xb, xs, xb], 1)
    b_cf = torch.cat([ws, wb, wb], 1)

    def bb_first():
        torch.backends.cuda.matmul.allow_tf32 = True
        return a_bb @ b_bb.t()

    def cross_first():
        torch.backends.cuda.matmul.allow_tf32 = True
        return a_cf @ b_cf.t()

    def three_calls():
        torch.backends.cuda.matmul.allow_tf32 = True
        return (xb @ ws.t() + xs @ wb.t()) + xb @ wb.t()

    out["split-bb-first"] = bb_first
    out["split-cross-first"] = cross_first
    out["split-3-calls"] = three_calls
    M, K = x.shape
    N = w.shape[0]
    for chunks in (4, 16):
        if K % chunks:
            pad = chunks - K % chunks
            xp = torch.nn.functional.pad(a_cf.view(M, 3, K), (0, pad)).view(M, 3, chunks, -1)
            wp = torch.nn.functional.pad(b_cf.view(N, 3, K), (0, pad)).view(N, 3, chunks, -1)
        else:
            xp = a_cf.view(M, 3, chunks, -1)
            wp = b_cf.view(N, 3, chunks, -1)
        # [chunks, M, 3 * K / chunks] and [chunks, 3 * K / chunks, N]: each chunk's thirds
        # cross first
        ac = xp.permute(2, 0, 1, 3).reshape(chunks, M, -1).contiguous()
        bc = wp.permute(2, 1, 3, 0).reshape(chunks, -1, N).contiguous()

        def chunked(ac=ac, bc=bc):
            torch.backends.cuda.matmul.allow_tf32 = True
            return torch.bmm(ac, bc).sum(0)

        out[f"split-k{chunks}"] = chunked
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1023x8191x8191,1024x8192x8192,255x12289x12287")
    args = ap.parse_args()
    print(f"{'M K N':>18} {'inputs':>6} {'variant':>18} {'ms':>7} {'max|d|':>9} {'miss':>6} "
          f"{'bn max|d|':>9} {'bn miss':>7} {'vs f64':>9}")
    for size in args.sizes.split(","):
        M, K, N = (int(s) for s in size.split("x"))
        for dist in ("rand", "randn"):
            torch.manual_seed(42)
            lin = torch.nn.Linear(K, N, bias=False)
            w = lin.weight.detach().cuda()
            x = (torch.rand if dist == "rand" else torch.randn)(M, K).cuda()
            exact = (x.double() @ w.double().t())
            vs = variants(x, w)
            want = vs["eager"]()
            want_bn = batch_norm(want)
            for name, fn in vs.items():
                ms = timed(fn)
                got = fn()
                miss, dmax = misses(got, want)
                bn_miss, bn_dmax = misses(batch_norm(got), want_bn)
                f64 = float((got.double() - exact).abs().max())
                print(f"{size:>18} {dist:>6} {name:>18} {ms:7.3f} {dmax:9.2e} {miss:6d} "
                      f"{bn_dmax:9.2e} {bn_miss:7d} {f64:9.2e}", flush=True)
            del vs, exact, x, w
            torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
