#pragma once
// A reduction over a middle dim that reads its column twice: a normalisation
// (softmax over dim 1) or a keepdim reduction with the chain after it fused
// (RMSNorm over the channels of NCHW: x / sqrt(mean(x * x, 1, True) + eps)).
//
// Each output's column is cut into S slices (the fewest, up to blockDim.x / 32, whose
// share fits the registers): a warp per slice and a lane per output, 32 consecutive
// outputs a group of S warps (coalesced along the inner dims), blockDim.x / 32 / S
// groups a block.
// Pass 1 reduces each slice, keeping its values in registers (K a thread: the whole
// column at the task's size when it fits 32 registers, else none); the S partial
// states go through shared memory and every slice merges all S in slice order (the
// same bits in every slice); pass 2 normalises or runs the epilogue from the
// registers, and reads what they do not hold from memory again.
//
// What it promises:
// - every element of a column is read and stored as without the registers, whatever
//   the column's length at run time;
// - merges are in a fixed order: the same input gives the same bits.

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "model/launch_plan.hpp"

#include <sstream>

namespace ks::rules {

struct reduce_parts;
struct reduce_layout;

// The column a thread reduces: `o` (the outer index) and `j` (the inner) of `t`, for a
// thread with `live` set. 64-bit division costs about a hundred instructions: below 2^31
// columns the split is in 32 bits.
void column_of(const reduce_parts& rp, std::ostringstream& k);

// The kernel's body after its signature, and the plan step's grid.
status write_middle_two_pass(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay,
                             std::ostringstream& k, plan_step& step);

}  // namespace ks::rules
