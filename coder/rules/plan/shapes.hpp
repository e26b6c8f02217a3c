#pragma once
// Every value's shape as expressions over the task's input shapes (x.shape[1], ...),
// so that one plan serves every size of the task; the graph's own sizes decide only
// structure.
//
// What it promises:
// - shape_of_node sets the shape of what a template takes, or errors naming the op
//   and value; the expressions of a result have the rank of the graph's result;
// - fallback_shapes matches each dim of a fallback's results to an input dim of the
//   same size (else the number), and refuses an op without an ATen schema or whose
//   non-tensor result something reads.

#include <string>
#include <vector>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

// The broadcast shape of the tensor operands, with expressions taken from an operand
// that has the dimension.
shaped broadcast(const lowering_context& cx, const std::vector<std::string>& ids, const std::vector<int64_t>& target);
// The shape of `n`'s result, when a template takes op `kind`.
status shape_of_node(lowering_context& cx, const graph_node& n, const std::string& kind);
// The shapes of a fallback op's results; `why` is why no template takes it.
status fallback_shapes(lowering_context& cx, const graph_node& n, const std::string& why);

}  // namespace ks::rules
