#pragma once
// An elementwise chain over [N, H, W, C] that stores values the plan needs as their
// permute [0, 3, 1, 2], [N, C, H, W] (or over [N, D, H, W, C] as [N, C, D, H, W], the
// positions then D * H * W) (a channels-last convolution's epilogue whose
// result the graph returns: conv_layout.hpp). Each block computes a tile of 32
// positions (H * W) x 32 channels of one batch: the chain reads its operands along
// the channels (coalesced, as [N, H, W, C] lies), the value goes through shared
// memory, and the store walks the positions (coalesced, as [N, C, H, W] lies).
//
// What it promises:
// - one kernel and its plan step for stage `si` (an elementwise stage with
//   `permuted` values, made by permute_store in stages.cpp);
// - every value of the chain the plan needs as it is is stored at its own index, once
//   per element; every permuted value at its permuted index, once per element;
// - any N, H, W, C: partial tiles are masked, and batches or channel tiles beyond
//   the grid's 65535 are walked by the blocks.

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

status emit_transpose_store(lowering_context& cx, size_t si);

}  // namespace ks::rules
