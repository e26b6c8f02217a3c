#pragma once
// A task's reference as a dataflow graph: what `kernelskill-gpu --graph` prints
// (gpu/graph_export.hpp), read without LibTorch. The rules coder lowers it.
//
// JSON form:
//   {"task": "gelu",
//    "inputs":  [{"value": "x", "name": "x"}, ...],   // forward's arguments, in order
//    "values":  {"x": {"type": "Tensor", "shape": [64, 256], "dtype": "float32"},
//                "3": {"type": "str", "value": "none", "constant": true}, ...},
//    "nodes":   [{"kind": "aten::gelu", "inputs": ["x", "3"], "outputs": ["4"],
//                 "schema": "aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor"}, ...],
//    "outputs": ["4"]}
// Shapes and scalar values are those of one CPU run at the size the graph was
// exported at; prim::Constant nodes are folded into "values" (marked constant).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ks {

struct graph_value {
  std::string id;
  // "Tensor", "int", "float", "bool", "str", "None", "int[]", "float[]", "bool[]",
  // "Tensor[]", or the interpreter's tag for anything else.
  std::string type;
  std::vector<int64_t> shape;   // Tensor
  std::string dtype;            // Tensor
  std::vector<double> numbers;  // int, float, bool: one; lists: each element
  std::string text;             // str
  bool constant = false;        // a literal of the graph (not computed from inputs)

  bool is_tensor() const { return type == "Tensor"; }
  bool is_none() const { return type == "None"; }
  bool is_scalar() const { return type == "int" || type == "float" || type == "bool"; }
  int64_t numel() const;
};

struct graph_node {
  std::string kind;  // "aten::relu", "prim::ListConstruct", ...
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // The op's ATen schema ("aten::sort(Tensor self, int dim=-1, ...) -> (...)"), empty
  // for nodes without one (prim::*): what a library step needs to call it by name.
  std::string schema;
};

struct task_graph {
  std::string task;
  std::vector<std::string> input_values;  // value ids of forward's arguments
  std::vector<std::string> input_names;   // the task's tensor names for them
  std::map<std::string, graph_value> values;
  std::vector<graph_node> nodes;  // in execution order
  std::vector<std::string> outputs;

  // The value `id`, or nullptr.
  const graph_value* value(std::string_view id) const;
};

// Reads the JSON of `kernelskill-gpu --graph`. Errors name the field.
result<task_graph> parse_task_graph(std::string_view json);

}  // namespace ks
