#pragma once
// Each template's search space (coder/search_space.hpp): the parameters its kernel
// reads and their legal values for the stage's shapes at the target size. The template
// table (template_table.hpp) names one of these per row; lower_graph calls it for every
// stage it emitted.
//
// Legal means: the kernel it gives is correct, and the value makes a difference of its
// own at these shapes — a block no wider than the work it walks, a vector no wider than
// a warp's share of the tensor, a split that changes how many blocks a row takes, a
// run of pool outputs whose shared inputs fit the registers. Values come from the
// shapes only (never from a task's name), so two sizes of one task may differ.
//
// What it promises:
// - it reads the context and never changes it (variants are worked out on copies);
// - the current value of a parameter is legal wherever the value itself is (a seed's
//   value outside the legal set, e.g. a block wider than a tiny tensor, stays usable:
//   the space only bounds the moves away from it).

#include <cstddef>

#include "coder/rules/plan/lowering_context.hpp"
#include "coder/search_space.hpp"

namespace ks::rules {

void elementwise_space(const lowering_context& cx, size_t si, search_space& out);
void row_reduce_space(const lowering_context& cx, size_t si, search_space& out);
void scan_space(const lowering_context& cx, size_t si, search_space& out);
void pool_space(const lowering_context& cx, size_t si, search_space& out);
void library_space(const lowering_context& cx, size_t si, search_space& out);
// A fallback step (an ATen call by its schema) has nothing to tune.
void no_space(const lowering_context& cx, size_t si, search_space& out);

// The parameters of the whole lowering rather than of one stage: fast_math where a
// kernel calls what it changes (`source` is the kernels' text), fuse_prologue where a
// reduction or a scan could read its chain on its loads.
void global_space(const lowering_context& cx, const std::string& source, search_space& out);

}  // namespace ks::rules
