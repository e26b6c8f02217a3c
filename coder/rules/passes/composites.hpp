#pragma once
// Ops ATen computes in one call that the templates can fuse once written out: the
// pointwise losses (kl_div as ATen 2.x computes it: xlogy, so a negative target gives
// NaN where ATen 1.x gave 0), rewritten before lowering into the elementwise ops and the
// whole-tensor reduction they are made of, so that the loss runs as one reduction
// with its prologue computed on load instead of a library step.
//
//   d = x - y, a = |d|, m = min(a, b)
//   mse_loss(x, y, r)            d * d
//   l1_loss(x, y, r)             a
//   smooth_l1_loss(x, y, r, b)   m * m * (0.5 / b) + (a - m)      (a when b is 0)
//   huber_loss(x, y, r, b)       m * m * 0.5 + b * (a - m)
//   kl_div(x, t, r, log_target)  xlogy(t, t) - t * x, or exp(t) * (t - x) with log_target
// then reduction r: 0 none, 1 mean (over every element), 2 sum. And the triplet
// margin loss, as two (three with swap) row norms over the last dim and the
// elementwise chain after them:
//   triplet_margin_loss(a, p, n, margin, q, eps, swap, r)
//       clamp_min(margin + d(a, p) - d(a, n), 0),  d(x, y) = norm(x - y + eps, q) over
//       the last dim (ATen's pairwise_distance; q 1 or 2), d(a, n) = min(d(a, n), d(p, n))
//       with swap.
//
// Below b, m = a and the first term is ATen's 0.5 d² / b (resp. 0.5 d²); above it,
// m = b and the sum is a - b / 2 (resp. b (a - b / 2)). Rounding differs from ATen's by
// an ulp or so per element (1 / b taken once).
//
// And cross_entropy with class indices (ATen's log_softmax then nll_loss), as a row
// logsumexp over the classes and the target's logit gathered:
//   cross_entropy_loss(x, t, None, r, ignore_index, 0)
//       valid = t != ignore_index, l = logsumexp(x, [1]) - gather(x, 1, where(valid, t, 0)),
//       lm = where(valid, l, 0); r none: lm, sum: sum(lm), mean: sum(lm) / sum(valid)
//       (NaN when every target is ignored, 0 / 0, as ATen's).
//
// And a global average pool (a library step before, reading a tensor the elementwise
// chain before it had written whole), as the row mean ATen computes it by:
//   adaptive_avg_pool{1,2,3}d(x, [1, ...])   mean(x, last 1 / 2 / 3 dims, keepdim=True)
// so the chain (a convolution's bias and activation) is computed on the mean's load.
//
// What it promises:
// - only a pool whose output size is a constant of ones (one number, or one per pooled
//   dim) over a float tensor with a dim before the pooled ones becomes a mean;
// - only a loss whose two (three) inputs are float tensors of one shape, whose
//   reduction and b (margin, q, eps, swap) are constants of the graph, and whose result nothing else reads under
//   another name is rewritten; anything else is left as it was: a library step runs it (operands that broadcast), or,
//   with a reduction or b computed at run time, the lowering refuses it naming that argument (a library step's
//   attributes are fixed text);
// - cross_entropy only with a float x of rank 2 (classes along dim 1), int64 targets
//   of shape [N], weight None, reduction and ignore_index constants of the graph and
//   label_smoothing a constant 0 (class probabilities as targets, weights, smoothing
//   and higher ranks stay ATen's one call). The logsumexp is a row reduction that
//   reads x once; what reads the targets, the mask or the int64 count (ne, where,
//   unsqueeze, gather, squeeze, the count's sum, the mean's div) runs as library
//   steps. A target outside [0, C) that is not ignore_index makes the gather raise,
//   as ATen's nll_loss raises;
// - new values have ids no graph export gives ("ks.composite.N.…"), with the input's
//   shape and dtype unless the op makes another (cross_entropy's bool mask, int64
//   indices and count, its [N] rows); every new node carries its ATen schema, so that
//   a stage no template takes can still run it as a library step.

#include "coder/task_graph.hpp"

namespace ks::rules {

task_graph expand_composites(const task_graph& graph);

}  // namespace ks::rules
