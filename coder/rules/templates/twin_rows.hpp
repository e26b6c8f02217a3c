#pragma once
// Sibling row reductions fused: two plain reductions over the same rows, each behind
// its own fused prologue, read in one pass by one kernel (KernelBench's triplet loss:
// the distances anchor-positive and anchor-negative both read the anchor; as two
// kernels the anchor crossed DRAM twice, four tensors' traffic for three).
//
// What it promises:
// - only where both are plain (sum, mean, norms, max, min: one state variable, no
//   normalisation, no epilogue, no groups) over the last dims with the same row and
//   length expressions, each with a prologue, a block or a full warp per row, no row
//   cache and no split (the form that reads every element once from memory), and the
//   second reads nothing produced at or after the first (so running it there keeps
//   every value it reads ready);
// - each result as its own kernel would give it: the same elements in the same order
//   per thread and the same combine, so the bits match the two kernels';
// - the pairing is decided before any template writes (plan_twin_rows, which the
//   driver, coder/lowering.cpp, runs right after plan_stages: it reads the row
//   template's layout, so it lives here, above plan/): the first is marked with the
//   second (reduce_stage::twin) and the second with the first
//   (reduce_stage::twin_of), which no template writes again; emitting only reads the
//   marks.

#include <cstddef>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

struct reduce_parts;
struct reduce_layout;

// Pairs each reduction with the first later one its kernel can read beside it, as
// the two kernels' layouts would be chosen (on a copy of the context: nothing of `cx`
// but the marks changes). Needs the plan's tensors (plan_buffers).
void plan_twin_rows(lowering_context& cx);

// Writes stages si and sj (paired by plan_twin_rows) as one kernel and its plan step.
status emit_twin_rows(lowering_context& cx, size_t si, size_t sj, reduce_parts& rp, const reduce_layout& lay);

}  // namespace ks::rules
