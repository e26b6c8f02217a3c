#pragma once
// What the graph rewrites that run before the stages are planned share
// (composites.cpp, conv_bias.cpp, identities.cpp, sum_of_product.cpp): the schemas of
// the nodes they write, a constant number of the graph, and a new value of the
// rewritten graph.
//
// What it promises: the schemas are ATen's own text for those overloads (a library
// step calls the op by it); a new value's id is the caller's prefix and name, which no
// graph export gives ("ks.<rewrite>.N.<name>"), so it cannot collide with the graph's.

#include <string>

#include "coder/task_graph.hpp"

namespace ks::rules {

inline constexpr const char* kAddTensorSchema =
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
inline constexpr const char* kMulTensorSchema = "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor";

// The value `id` of `g` where it is a constant number (int, float or bool), or nullptr.
inline const graph_value* constant_number(const task_graph& g, const std::string& id) {
  const graph_value* v = g.value(id);
  if (!v || !v->constant || !v->is_scalar() || v->numbers.size() != 1) return nullptr;
  return v;
}

// The value `prefix + name` of `g`, of `type`, made (or reset to that id and type).
inline graph_value& new_value(task_graph& g, const std::string& prefix, const std::string& name,
                              const std::string& type) {
  graph_value& v = g.values[prefix + name];
  v.id = prefix + name;
  v.type = type;
  return v;
}

}  // namespace ks::rules
