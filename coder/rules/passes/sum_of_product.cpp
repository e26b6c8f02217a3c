#include "coder/rules/passes/sum_of_product.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "coder/rules/passes/graph_rewrite.hpp"
#include "coder/rules/plan/expr_text.hpp"

namespace ks::rules {

namespace {

const char* kSumDim =
    "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
const char* kMeanDim =
    "aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
const char* kToDtype =
    "aten::to.dtype(Tensor self, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? "
    "memory_format=None) -> Tensor";
// ScalarType codes, as a graph's constants give them.
constexpr double kFloat32 = 6, kFloat64 = 7;

bool f32(const graph_value* v, size_t rank) {
  return v && v->is_tensor() && v->dtype == "float32" && v->shape.size() == rank;
}

// The product's x, its second operand, which of that operand's dims is N, and its bias
// (empty: none); false when `n` is not such a product.
struct product_parts {
  std::string x, w, bias;
  int64_t n_dim = 0;
};

bool read_product(const task_graph& g, const graph_node& n, product_parts& p) {
  const std::string k = base_kind(n.kind);
  if (n.outputs.size() != 1 || n.inputs.size() < 2) return false;
  const graph_value* x = g.value(n.inputs[0]);
  const graph_value* w = g.value(n.inputs[1]);
  const graph_value* y = g.value(n.outputs[0]);
  if (!f32(x, 2) || !f32(w, 2) || !f32(y, 2)) return false;
  p.x = n.inputs[0];
  p.w = n.inputs[1];
  if (k == "aten::linear") {
    if (w->shape[1] != x->shape[1] || n.inputs.size() > 3) return false;
    p.n_dim = 0;
    if (n.inputs.size() == 3) {
      const graph_value* b = g.value(n.inputs[2]);
      if (!b) return false;
      if (!b->is_none()) {
        if (!f32(b, 1) || b->shape[0] != w->shape[0]) return false;
        p.bias = n.inputs[2];
      }
    }
    return true;
  }
  if ((k == "aten::mm" || k == "aten::matmul") && n.inputs.size() == 2) {
    if (w->shape[0] != x->shape[1]) return false;
    p.n_dim = 1;
    return true;
  }
  return false;
}

// A sum or mean over the last of two dims, with no dtype: "sum" / "mean", else "".
std::string last_dim_reduction(const task_graph& g, const graph_node& r) {
  const std::string k = base_kind(r.kind);
  if ((k != "aten::sum" && k != "aten::mean") || r.inputs.size() != 4 || r.outputs.size() != 1) return "";
  const graph_value* dims = g.value(r.inputs[1]);
  const graph_value* keep = g.value(r.inputs[2]);
  const graph_value* dtype = g.value(r.inputs[3]);
  if (!dims || dims->type != "int[]" || dims->numbers.size() != 1) return "";
  if (dims->numbers[0] != 1 && dims->numbers[0] != -1) return "";
  if (!keep || keep->type != "bool" || keep->numbers.size() != 1 || !dtype || !dtype->is_none()) return "";
  return k.substr(6);
}

}  // namespace

task_graph sum_of_products(const task_graph& graph, std::vector<std::string>& rewrites) {
  std::map<std::string, std::vector<const graph_node*>> readers;
  for (const auto& n : graph.nodes)
    for (const auto& i : n.inputs) readers[i].push_back(&n);
  task_graph out = graph;
  out.nodes.clear();
  std::set<const graph_node*> replaced;
  int index = 0;
  for (const auto& n : graph.nodes) {
    if (replaced.count(&n)) continue;
    product_parts p;
    const bool product = read_product(graph, n, p);
    const std::string& y = product ? n.outputs[0] : std::string();
    const auto rd = product ? readers.find(y) : readers.end();
    const bool one_reader =
        rd != readers.end() && rd->second.size() == 1 && !std::count(graph.outputs.begin(), graph.outputs.end(), y) &&
        std::count(rd->second[0]->inputs.begin(), rd->second[0]->inputs.end(), y) == 1 && rd->second[0]->inputs[0] == y;
    const std::string red = one_reader ? last_dim_reduction(graph, *rd->second[0]) : "";
    if (red.empty()) {
      out.nodes.push_back(n);
      continue;
    }
    const graph_node& r = *rd->second[0];
    replaced.insert(&r);
    const graph_value& xv = *graph.value(p.x);
    const graph_value& wv = *graph.value(p.w);
    const std::string prefix = "ks.sum_of_product." + std::to_string(index++) + ".";
    auto value = [&](const std::string& name, const std::string& type) -> graph_value& {
      return new_value(out, prefix, name, type);
    };
    auto constant = [&](const std::string& name, const std::string& type, std::vector<double> numbers) {
      graph_value& v = value(name, type);
      v.numbers = std::move(numbers);
      v.constant = true;
      return v.id;
    };
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
      graph_value& v = value(name, "Tensor");
      v.shape = std::move(shape);
      v.dtype = "float32";
      return v.id;
    };
    const std::string none = value("none", "None").id;
    out.values[none].constant = true;
    const std::string no = constant("keep_no", "bool", {0});
    const std::string reduce_schema = red == "sum" ? kSumDim : kMeanDim;
    const std::string reduce_kind = "aten::" + red;
    const int64_t K = xv.shape[1];
    // The weight's sum (or mean) over its N dim, accumulated in float64 and rounded
    // once: [K]. Each of its K elements enters the dot with x, so their FP32 rounding
    // errors would add up over K (a column summed in float: 1.8e-4 off on KernelBench's
    // 18_Matmul_Sum_... at 1024 x 8192 x 8192, where the reference's pairwise sums of
    // the outputs are good to ~1e-5, and 1e-4 fails a result near 0).
    graph_value& w64 = value("w64", "Tensor");
    w64.shape = {K};
    w64.dtype = "float64";
    out.nodes.push_back(graph_node{
        reduce_kind,
        {p.w, constant("w_dim", "int[]", {static_cast<double>(p.n_dim)}), no, constant("f64", "int", {kFloat64})},
        {w64.id},
        reduce_schema});
    const std::string w = tensor("w", {K});
    out.nodes.push_back(
        graph_node{"aten::to", {w64.id, constant("f32", "int", {kFloat32}), no, no, none}, {w}, kToDtype});
    const std::string xw = tensor("xw", xv.shape);
    out.nodes.push_back(graph_node{"aten::mul", {p.x, w}, {xw}, kMulTensorSchema});
    const std::string result = r.outputs[0];
    const std::string dot = p.bias.empty() ? result : tensor("dot", graph.value(result)->shape);
    out.nodes.push_back(
        graph_node{"aten::sum", {xw, constant("dot_dim", "int[]", {-1}), r.inputs[2], none}, {dot}, kSumDim});
    if (!p.bias.empty()) {
      const std::string bs = tensor("bias", {});
      out.nodes.push_back(
          graph_node{reduce_kind, {p.bias, constant("bias_dim", "int[]", {0}), no, none}, {bs}, reduce_schema});
      out.nodes.push_back(
          graph_node{"aten::add", {dot, bs, constant("alpha", "int", {1})}, {result}, kAddTensorSchema});
    }
    rewrites.push_back(base_kind(n.kind) + " + " + reduce_kind + ": a matrix-vector product (x · " + red +
                       " of the weight over its " + std::to_string(wv.shape[p.n_dim]) + " outputs" +
                       (p.bias.empty() ? "" : ", + the bias's " + red) + ")");
  }
  return out;
}

}  // namespace ks::rules
