#include "coder/rules/passes/conv_names.hpp"

#include <string>
#include <vector>

#include "coder/rules/passes/graph_rewrite.hpp"

namespace ks::rules {

namespace {

// ATen's schemas of the named convolutions, by spatial dims (1 to 3).
const char* conv_schema(size_t spatial, bool transposed) {
  static const char* plain[] = {
      "aten::conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=[1], int[1] padding=[0], int[1] "
      "dilation=[1], int groups=1) -> Tensor",
      "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] "
      "dilation=1, int groups=1) -> Tensor",
      "aten::conv3d(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=1, int[3] padding=0, int[3] "
      "dilation=1, int groups=1) -> Tensor"};
  static const char* trans[] = {
      "aten::conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=[1], int[1] padding=[0], "
      "int[1] output_padding=[0], int groups=1, int[1] dilation=[1]) -> Tensor",
      "aten::conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] "
      "padding=0, int[2] output_padding=0, int groups=1, int[2] dilation=1) -> Tensor",
      "aten::conv_transpose3d.input(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=1, int[3] "
      "padding=0, int[3] output_padding=0, int groups=1, int[3] dilation=1) -> Tensor"};
  return (transposed ? trans : plain)[spatial - 1];
}

// The constant boolean `id` of `g`, or -1.
int flag(const task_graph& g, const std::string& id) {
  const graph_value* v = constant_number(g, id);
  return v ? (v->numbers[0] != 0 ? 1 : 0) : -1;
}

}  // namespace

task_graph name_convolutions(const task_graph& graph) {
  task_graph out = graph;
  for (graph_node& n : out.nodes) {
    if (n.kind != "aten::_convolution" || n.inputs.size() != 13 || n.outputs.size() != 1) continue;
    const graph_value* x = graph.value(n.inputs[0]);
    const graph_value* w = graph.value(n.inputs[1]);
    if (!x || !w || !x->is_tensor() || !w->is_tensor() || x->shape.size() != w->shape.size() || x->shape.size() < 3 ||
        x->shape.size() > 5)
      continue;
    const int transposed = flag(graph, n.inputs[6]);
    if (transposed < 0 || flag(graph, n.inputs[9]) != 0 || flag(graph, n.inputs[10]) != 0 ||
        flag(graph, n.inputs[11]) != 1 || flag(graph, n.inputs[12]) != 1)
      continue;
    const size_t spatial = x->shape.size() - 2;
    const std::string name = (transposed ? "aten::conv_transpose" : "aten::conv") + std::to_string(spatial) + "d";
    const std::vector<std::string>& in = n.inputs;
    n.inputs = transposed ? std::vector<std::string>{in[0], in[1], in[2], in[3], in[4], in[7], in[8], in[5]}
                          : std::vector<std::string>{in[0], in[1], in[2], in[3], in[4], in[5], in[8]};
    n.kind = name;
    n.schema = conv_schema(spatial, transposed);
  }
  return out;
}

}  // namespace ks::rules
