#pragma once
// The fallback template: any other ATen op (or a variant the templates refuse) as a
// library step that calls it through ATen's dispatcher by its schema; the chains
// before and after it stay fused kernels.
//
// What it promises:
// - tensors are the step's positional args in the schema's order (a tensor list's
//   elements in place), every other argument an attribute named as in the schema,
//   with the graph's constant as text;
// - an argument computed at run time (an attribute is fixed text), a tensor list not
//   built in the graph, or an operand that is no tensor of the plan is an error that
//   names the op, its value and why no template takes it.

#include <string>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "plan/op_schema.hpp"

namespace ks::rules {

// What the fallback template chose for one op: the ATen schema it is called by, and
// why no template takes it.
struct fallback_call {
  op_schema schema;
  std::string why;
};

result<fallback_call> choose_fallback_call(const stage& st);

// A constant argument as the attribute text of a library step ("None", "True",
// "[1, 2]", ...).
result<std::string> attr_text(const graph_value& v);

// Stage `si` (a fallback) as a library step.
status emit_fallback(lowering_context& cx, size_t si);

}  // namespace ks::rules
