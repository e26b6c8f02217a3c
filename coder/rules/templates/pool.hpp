#pragma once
// The pool template: max_pool and avg_pool over the last one, two or three dims
// (NCL, NCHW, NCDHW, or without the batch), a thread per output element or per run of
// consecutive outputs along the last dim, with the elementwise chain after them fused
// before the store.
//
// What it promises:
// - a max pool propagates NaN and never picks padding; an average counts padding
//   inside the padded input but not past it (count_include_pad), or only the input
//   (not), or divides by divisor_override, as PyTorch does;
// - ceil_mode and returned indices are errors (read_pool, op_specs.hpp).

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/plan/op_specs.hpp"

namespace ks::rules {

// What the pool template chose for one pool.
struct pool_layout {
  pool_spec window;  // kernel, stride, padding, dilation, how an average divides
  int block = 256;   // threads per block
  // Consecutive outputs along the last dim a thread computes where windows overlap
  // along it (elements_per_thread, halved while the inputs they share would take more
  // than 64 registers; 1 for disjoint windows): the
  // (per_thread - 1) * stride + (kernel - 1) * dilation + 1 inputs of their windows
  // along that dim are loaded once, and the index is split once for all of them.
  int per_thread = 1;
  int64_t span() const;  // those inputs: registers a thread holds
};

result<pool_layout> choose_pool_layout(const lowering_context& cx, const graph_node& n);

// Stage `si` (a pool) as one kernel and its plan step.
status emit_pool(lowering_context& cx, size_t si);

}  // namespace ks::rules
