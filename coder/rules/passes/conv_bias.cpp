#include "coder/rules/passes/conv_bias.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "coder/rules/passes/graph_rewrite.hpp"
#include "coder/rules/plan/expr_text.hpp"
#include "coder/rules/plan/op_table.hpp"

namespace ks::rules {

namespace {

const char* kUnsqueeze = "aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)";

// The convolutions whose third argument is the bias (aten::_convolution: what a
// scripted module's convolution can be recorded as).
bool is_convolution(const std::string& kind) {
  // (Not the lowering's own ks::conv2d_nhwc: it is written after this pass, and its
  // result is NHWC, which a [C] bias would not broadcast over.)
  return op_is(kind, op_class::convolution) && kind.rfind("aten::", 0) == 0;
}

// Every reader of `v` is an op whose kernel can take the add in, and `v` is not an output.
bool read_by_templates_only(const task_graph& g, const std::string& v) {
  if (std::count(g.outputs.begin(), g.outputs.end(), v)) return false;
  bool read = false;
  for (const auto& n : g.nodes) {
    if (!std::count(n.inputs.begin(), n.inputs.end(), v)) continue;
    const std::string k = base_kind(n.kind);
    // (A pool takes no prologue: the add would be a kernel of its own before it.)
    if (!op_is(k, op_class::elementwise) && !op_is(k, op_class::reduction)) return false;
    read = true;
  }
  return read;
}

}  // namespace

task_graph split_conv_bias(const task_graph& graph) {
  task_graph out = graph;
  out.nodes.clear();
  int index = 0;
  for (const auto& n : graph.nodes) {
    const graph_value* b = n.inputs.size() > 2 ? graph.value(n.inputs[2]) : nullptr;
    const graph_value* y = n.outputs.size() == 1 ? graph.value(n.outputs[0]) : nullptr;
    const bool input = b && std::count(graph.input_values.begin(), graph.input_values.end(), b->id);
    if (!is_convolution(base_kind(n.kind)) || !input || !b->is_tensor() || !y || !y->is_tensor() ||
        b->dtype != "float32" || y->dtype != "float32" || b->shape.size() != 1 || y->shape.size() < 3 ||
        y->shape[1] != b->shape[0] || !read_by_templates_only(graph, y->id)) {
      out.nodes.push_back(n);
      continue;
    }
    const std::string prefix = "ks.conv_bias." + std::to_string(index++) + ".";
    auto value = [&](const std::string& name, const std::string& type) -> graph_value& {
      return new_value(out, prefix, name, type);
    };
    graph_value& none = value("none", "None");
    none.constant = true;
    graph_value& last = value("dim", "int");
    last.numbers = {-1};
    last.constant = true;
    graph_value& one = value("alpha", "int");
    one.numbers = {1};
    one.constant = true;
    graph_value& raw = value("raw", "Tensor");
    raw.shape = y->shape;
    raw.dtype = y->dtype;

    graph_node conv = n;
    conv.inputs[2] = none.id;
    conv.outputs = {raw.id};
    out.nodes.push_back(conv);
    // [C] -> [C, 1, ..., 1]: aligned with dim 1 of the result when broadcast.
    std::string view = b->id;
    for (size_t k = 2; k < y->shape.size(); ++k) {
      graph_value& u = value("bias" + std::to_string(k), "Tensor");
      u.shape = out.values.at(view).shape;
      u.shape.push_back(1);
      u.dtype = b->dtype;
      out.nodes.push_back(graph_node{"aten::unsqueeze", {view, last.id}, {u.id}, kUnsqueeze});
      view = u.id;
    }
    out.nodes.push_back(graph_node{"aten::add", {raw.id, view, one.id}, {y->id}, kAddTensorSchema});
  }
  return out;
}

}  // namespace ks::rules
