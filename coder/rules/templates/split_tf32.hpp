#pragma once
// The split-precision GEMM (3xTF32): a float32 product that is large enough to be
// bound by arithmetic runs on cuBLAS's TF32 tensor cores at FP32's accuracy.
//
// Each operand x is split as big = tf32(x), small = tf32(x - big) (rounded to TF32's
// 10-bit mantissa, nearest): big + small equals x to ~2^-22 of |x|, and TF32 holds both
// exactly. One kernel per operand writes them three times along K — the first operand
// as [big | small | big], the second as [small | big | big] — so that one library
// product over 3K, run with TF32 allowed (attrs.math: tf32,
// gpu/matmul_precision.hpp), sums big*small + small*big + big*big with FP32
// accumulation: everything but small*small (~2^-22 of each term). TF32 is ~7x the FP32
// FMA rate on Hopper, so three products still take about half of cuBLAS's FP32 SGEMM
// (which eager runs: ATen keeps TF32 off for matmul by default).
//
// The cross terms come first: the product accumulates along K in that order, and the
// tensor cores add each step's partial sums into the accumulator with truncation, an
// error of the accumulator's size each step. Summed while the accumulator holds only
// the small cross terms (2^-11 of the whole), two thirds of the steps add next to
// nothing; big*big first, every cross step was truncated against the whole sum
// (level 2's 33, 70 and 76 at K = 8191 missed 1e-4 by up to 3e-4 on outputs near zero,
// issue 46; bench/probes/tf32_accuracy_probe.py measures both orders).
//
// What it promises:
// - applies only with lowering param gemm_precision = split_tf32, to mm, matmul (both
//   operands at least 2-d), bmm, addmm and linear over float32 tensors, and only where
//   the task's shapes make the product bound by arithmetic: K at least kMinK and at
//   least kMinFlopsPerElement FLOPs per operand element split (the split's extra reads
//   and writes are then a few percent of the product), and at least kMinFlops in all;
// - at any size the product's operands are 16-byte aligned along their leading dims
//   (cuBLAS's TF32 tensor-core kernels need that; unaligned, the product runs a slow
//   kernel three times over, 0.68-0.99x of eager in issue 46): where the task's K is
//   not a multiple of kAlign, each third of a split operand is K rounded up to one
//   (round_up(K, 4)), the rest zeros, which add nothing to the product; the plan's
//   scratch shapes say so. Where B's leading dim N (mm, matmul, bmm, addmm: B is
//   [..., K, N]) is not a multiple of kAlign: a matrix B of mm, matmul or addmm with
//   beta = alpha = 1 is split transposed, [N, 3K] as linear's weight, and the step
//   becomes aten::linear (addmm's input its bias); otherwise (bmm, a batched B, other
//   beta or alpha) the product is not split (FP32's SGEMM reads B unaligned too, at a
//   third of the work). The output's leading dim is N too: where the product runs as
//   linear and only elementwise kernels or reductions over its rows (softmax,
//   log_softmax, logsumexp, a layer norm, a sum over the last dim; directly or through
//   their prologue) read its 2-d result, not an output of the plan, B's rows and the
//   bias are padded to round_up(N, 4) and the result stored [M, round_up(N, 4)]
//   (lowering_context::row_pitch; elementwise kernels index it by row and column, a
//   reduction's kernels read row r from r * pitch: row_reduce.cpp's pitched_rows);
//   every output of the plan stays [M, N]; otherwise (a reduction over M, a batch
//   norm, the product returned or viewed)
//   (N odd, the rows not padded) the product is not split: its stores would be
//   unaligned, and three unaligned TF32 products lose to FP32's SGEMM
//   (bench/probes/tf32_odd_probe.py, H100, 1023 x 8191 x 8191: 3 x 1.03 ms against
//   2.69 ms; aligned 3 x 0.339 ms) — never the cliff;
// - the library step keeps its op, its other arguments and its result; only the two
//   operands become the split scratch tensors, and the stage is named in
//   lowered_kernel_set::rewrites.

#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/templates/library.hpp"

namespace ks::rules {

constexpr int64_t kMinK = 128;
constexpr int64_t kMinFlopsPerElement = 512;
constexpr int64_t kMinFlops = int64_t{1} << 30;
// Elements (float32) in 16 bytes: cuBLAS's TF32 tensor-core kernels want leading dims
// and pointers 16-byte aligned.
constexpr int64_t kAlign = 4;

// Which args of the step are the product's two operands, and how each is laid out.
struct split_tf32_layout {
  bool apply = false;
  size_t a_arg = 0, b_arg = 1;  // indices into the step's args
  bool b_is_weight = false;     // linear: the second operand is [N, K] (split along its last dim)
  // K (at the task's shapes) not a multiple of kAlign, or pad_n with linear's weight
  // (the padded split's float4 stores need thirds of a multiple of 4 at any size):
  // each third padded.
  bool pad_k = false;
  // B a matrix [K, N] with N (at the task's shapes) not a multiple of kAlign: split
  // transposed as linear's weight [N, 3K], the step run as linear.
  bool b_transposed = false;
  // N (at the task's shapes) not a multiple of kAlign, the product linear's and its
  // result read by elementwise kernels or reductions over its rows only: B's rows (and
  // the bias) padded to
  // round_up(N, 4) with zeros, the result stored [M, round_up(N, 4)]
  // (lowering_context::row_pitch).
  bool pad_n = false;
};

split_tf32_layout choose_split_tf32(const lowering_context& cx, const graph_node& n, const library_call& call);

// Writes the two split kernels (before the product, in the plan), their scratch
// tensors, and points `step`'s operand args at them with attrs.math = tf32.
status emit_split_tf32(lowering_context& cx, size_t si, const graph_node& n, const split_tf32_layout& lay,
                       plan_step& step);

}  // namespace ks::rules
