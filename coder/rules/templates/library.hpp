#pragma once
// The library template: matmul/mm/bmm/addmm/linear/conv2d as ATen library steps
// (no kernel of ours); the elementwise ops after them become one fused epilogue
// kernel (elementwise.cpp).
//
// What it promises:
// - the step's positional args are the op's tensors in ATen's order (bias included
//   when given), its attributes the constants addmm and conv2d take;
// - an operand that is not a tensor of the plan, or a result nothing reads, is an
//   error naming the op.

#include <cstddef>
#include <string>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

// What the library template chose for one op: which ATen op, and how many of its
// leading inputs are tensor args (linear's and conv2d's bias may be None).
struct library_call {
  std::string op;
  size_t tensors = 2;
};

library_call choose_library_call(const lowering_context& cx, const graph_node& n);

// Stage `si` (a product or convolution) as a library step.
status emit_library(lowering_context& cx, size_t si);

}  // namespace ks::rules
