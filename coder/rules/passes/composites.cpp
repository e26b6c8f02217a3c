#include "coder/rules/passes/composites.hpp"

#include <optional>
#include <string>
#include <vector>

#include "coder/rules/passes/graph_rewrite.hpp"

namespace ks::rules {

namespace {

const char* kSub = "aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
const char* kAdd = kAddTensorSchema;
const char* kMul = kMulTensorSchema;
const char* kMulScalar = "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor";
const char* kAbs = "aten::abs(Tensor self) -> Tensor";
const char* kClampMax = "aten::clamp_max(Tensor self, Scalar max) -> Tensor";
const char* kXlogy = "aten::xlogy.Tensor(Tensor self, Tensor other) -> Tensor";
const char* kExp = "aten::exp(Tensor self) -> Tensor";
const char* kMean = "aten::mean(Tensor self, *, ScalarType? dtype=None) -> Tensor";
const char* kMeanDim =
    "aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
const char* kSum = "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor";
const char* kAddScalar = "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor";
const char* kNormDim = "aten::norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor";
const char* kMinimum = "aten::minimum(Tensor self, Tensor other) -> Tensor";
const char* kClampMin = "aten::clamp_min(Tensor self, Scalar min) -> Tensor";
const char* kLogsumexp = "aten::logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor";
const char* kNeScalar = "aten::ne.Scalar(Tensor self, Scalar other) -> Tensor";
const char* kWhereScalarOther = "aten::where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor";
const char* kUnsqueeze = "aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)";
const char* kGather = "aten::gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor";
const char* kSqueezeDim = "aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)";
const char* kDiv = "aten::div.Tensor(Tensor self, Tensor other) -> Tensor";

bool is_float(const std::string& dtype) {
  return dtype == "float32" || dtype == "float64" || dtype == "float16" || dtype == "bfloat16";
}

// Writes one loss node out; false (nothing added) when it is not one this rewrites.
class expansion {
 public:
  expansion(task_graph& out, const graph_node& n, int index)
      : g_(out), n_(n), prefix_("ks.composite." + std::to_string(index) + ".") {}

  bool run() {
    const std::string op = n_.kind;
    if (op == "aten::triplet_margin_loss") return triplet();
    if (op == "aten::cross_entropy_loss") return cross_entropy();
    if (op == "aten::adaptive_avg_pool1d") return global_average(1);
    if (op == "aten::adaptive_avg_pool2d") return global_average(2);
    if (op == "aten::adaptive_avg_pool3d") return global_average(3);
    if (op != "aten::mse_loss" && op != "aten::l1_loss" && op != "aten::smooth_l1_loss" && op != "aten::huber_loss" &&
        op != "aten::kl_div")
      return false;
    const bool two_args = op == "aten::mse_loss" || op == "aten::l1_loss";
    const size_t want = two_args ? 3 : 4;
    if (n_.inputs.size() != want || n_.outputs.size() != 1) return false;
    const graph_value* x = g_.value(n_.inputs[0]);
    const graph_value* y = g_.value(n_.inputs[1]);
    if (!x || !y || !x->is_tensor() || !y->is_tensor() || x->shape != y->shape || x->dtype != y->dtype ||
        !is_float(x->dtype))
      return false;
    const graph_value* red = constant_number(g_, n_.inputs[2]);
    if (!red) return false;
    const int reduction = static_cast<int>(red->numbers[0]);
    if (reduction < 0 || reduction > 2) return false;
    double b = 0;
    if (!two_args) {
      const graph_value* bv = constant_number(g_, n_.inputs[3]);
      if (!bv || bv->numbers[0] < 0) return false;
      b = bv->numbers[0];  // kl_div: log_target, 0 or 1
    }
    shape_ = x->shape;
    dtype_ = x->dtype;
    const graph_value* result = g_.value(n_.outputs[0]);
    if (!result) return false;

    std::string loss;
    if (op == "aten::kl_div") {
      // ATen's: input holds log-probabilities, target probabilities (or their logs).
      const std::string& x = n_.inputs[0];
      const std::string& t = n_.inputs[1];
      if (b != 0) {
        const std::string e = node("aten::exp", kExp, {t});
        const std::string df = node("aten::sub", kSub, {t, x, number("int", 1)});
        loss = node("aten::mul", kMul, {e, df});
      } else {
        const std::string xl = node("aten::xlogy", kXlogy, {t, t});
        const std::string tx = node("aten::mul", kMul, {t, x});
        loss = node("aten::sub", kSub, {xl, tx, number("int", 1)});
      }
      return finish(loss, reduction);
    }
    const std::string d = node("aten::sub", kSub, {n_.inputs[0], n_.inputs[1], number("int", 1)});
    if (op == "aten::mse_loss") {
      loss = node("aten::mul", kMul, {d, d});
    } else if (op == "aten::l1_loss" || (op == "aten::smooth_l1_loss" && b == 0)) {
      loss = node("aten::abs", kAbs, {d});
    } else {  // smooth_l1_loss with b > 0, huber_loss
      const std::string a = node("aten::abs", kAbs, {d});
      const std::string m = node("aten::clamp_max", kClampMax, {a, number("float", b)});
      const std::string mm = node("aten::mul", kMul, {m, m});
      const bool smooth = op == "aten::smooth_l1_loss";
      const std::string quad = node("aten::mul", kMulScalar, {mm, number("float", smooth ? 0.5 / b : 0.5)});
      std::string lin = node("aten::sub", kSub, {a, m, number("int", 1)});
      if (!smooth) lin = node("aten::mul", kMulScalar, {lin, number("float", b)});
      loss = node("aten::add", kAdd, {quad, lin, number("int", 1)});
    }
    return finish(loss, reduction);
  }

  std::vector<graph_node>& nodes() { return added_; }

 private:
  // triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction)
  // as ATen computes it: d(x, y) = norm(x - y + eps, p) over the last dim (ATen's
  // pairwise_distance), clamp_min(margin + d(a, pos) - d(a, neg), 0), with
  // min(d(a, neg), d(pos, neg)) for d(a, neg) under swap; then the reduction. Taken
  // for three float tensors of one shape of rank 2 or more, p 1 or 2 (the norms the
  // row reductions compute) and constant arguments.
  bool triplet() {
    if (n_.inputs.size() != 8 || n_.outputs.size() != 1) return false;
    const graph_value* a = g_.value(n_.inputs[0]);
    const graph_value* pos = g_.value(n_.inputs[1]);
    const graph_value* neg = g_.value(n_.inputs[2]);
    if (!a || !pos || !neg || !a->is_tensor() || !pos->is_tensor() || !neg->is_tensor() || a->shape != pos->shape ||
        a->shape != neg->shape || a->dtype != pos->dtype || a->dtype != neg->dtype || !is_float(a->dtype) ||
        a->shape.size() < 2)
      return false;
    const graph_value* margin = constant_number(g_, n_.inputs[3]);
    const graph_value* p = constant_number(g_, n_.inputs[4]);
    const graph_value* eps = constant_number(g_, n_.inputs[5]);
    const graph_value* swap = constant_number(g_, n_.inputs[6]);
    const graph_value* red = constant_number(g_, n_.inputs[7]);
    if (!margin || !p || !eps || !swap || !red || !g_.value(n_.outputs[0])) return false;
    if (p->numbers[0] != 1 && p->numbers[0] != 2) return false;
    const int reduction = static_cast<int>(red->numbers[0]);
    if (reduction < 0 || reduction > 2) return false;
    shape_ = a->shape;
    dtype_ = a->dtype;
    const std::vector<int64_t> rows(a->shape.begin(), a->shape.end() - 1);
    auto distance = [&](const std::string& x, const std::string& y) {
      const std::string d = node("aten::sub", kSub, {x, y, number("int", 1)});
      const std::string e = node("aten::add", kAddScalar, {d, number("float", eps->numbers[0]), number("int", 1)});
      return node("aten::norm", kNormDim, {e, number("float", p->numbers[0]), ints({-1}), number("bool", 0)}, rows);
    };
    const std::string dp = distance(n_.inputs[0], n_.inputs[1]);
    std::string dn = distance(n_.inputs[0], n_.inputs[2]);
    if (swap->numbers[0] != 0) dn = node("aten::minimum", kMinimum, {dn, distance(n_.inputs[1], n_.inputs[2])}, rows);
    const std::string m =
        node("aten::add", kAddScalar, {dp, number("float", margin->numbers[0]), number("int", 1)}, rows);
    const std::string s = node("aten::sub", kSub, {m, dn, number("int", 1)}, rows);
    return finish(node("aten::clamp_min", kClampMin, {s, number("float", 0)}, rows), reduction);
  }

  // cross_entropy_loss(x, t, weight, reduction, ignore_index, label_smoothing) with
  // class indices, as ATen computes it (log_softmax, then nll_loss):
  //   valid = t != ignore_index, l = logsumexp(x, [1]) - x[i, t'] with t' = where(valid, t, 0),
  //   lm = where(valid, l, 0); reduction none: lm, sum: sum(lm), mean: sum(lm) / sum(valid)
  // (NaN, 0 / 0, when every target is ignored, as ATen's). The logsumexp is a row
  // reduction over x; the gather and whatever reads the int64 targets or the mask are
  // library steps. A target out of [0, C) that is not ignore_index makes the gather
  // raise, as ATen's nll_loss does. Taken for a float x of rank 2 (classes along dim 1),
  // int64 targets of shape [N], no weight, constant reduction and ignore_index, and
  // label_smoothing a constant 0.
  bool cross_entropy() {
    if (n_.inputs.size() != 6 || n_.outputs.size() != 1) return false;
    const graph_value* x = g_.value(n_.inputs[0]);
    const graph_value* t = g_.value(n_.inputs[1]);
    const graph_value* weight = g_.value(n_.inputs[2]);
    if (!x || !t || !weight || !x->is_tensor() || !t->is_tensor() || !is_float(x->dtype) || x->shape.size() != 2 ||
        t->dtype != "int64" || t->shape != std::vector<int64_t>{x->shape[0]} || !weight->is_none() || !weight->constant)
      return false;
    const graph_value* red = constant_number(g_, n_.inputs[3]);
    const graph_value* ignore = constant_number(g_, n_.inputs[4]);
    const graph_value* smoothing = constant_number(g_, n_.inputs[5]);
    if (!red || !ignore || !smoothing || smoothing->numbers[0] != 0 || !g_.value(n_.outputs[0])) return false;
    const int reduction = static_cast<int>(red->numbers[0]);
    if (reduction < 0 || reduction > 2) return false;
    shape_ = x->shape;
    dtype_ = x->dtype;
    const std::vector<int64_t> rows = {x->shape[0]};
    const std::string& xs = n_.inputs[0];
    const std::string& ts = n_.inputs[1];
    const std::string lse = node("aten::logsumexp", kLogsumexp, {xs, ints({1}), number("bool", 0)}, rows);
    const std::string valid = node("aten::ne", kNeScalar, {ts, number("int", ignore->numbers[0])}, rows, "bool");
    const std::string safe = node("aten::where", kWhereScalarOther, {valid, ts, number("int", 0)}, rows, "int64");
    const std::string index =
        node("aten::unsqueeze", kUnsqueeze, {safe, number("int", 1)}, std::vector<int64_t>{x->shape[0], 1}, "int64");
    const std::string picked = node("aten::gather", kGather, {xs, number("int", 1), index, number("bool", 0)},
                                    std::vector<int64_t>{x->shape[0], 1});
    const std::string p = node("aten::squeeze", kSqueezeDim, {picked, number("int", 1)}, rows);
    const std::string l = node("aten::sub", kSub, {lse, p, number("int", 1)}, rows);
    const std::string lm = node("aten::where", kWhereScalarOther, {valid, l, number("float", 0)}, rows);
    if (reduction == 0) {
      rename(lm, n_.outputs[0]);
      return true;
    }
    const std::vector<int64_t> scalar;
    if (reduction == 2) {
      added_.push_back(graph_node{"aten::sum", {lm, none()}, {n_.outputs[0]}, kSum});
      return true;
    }
    const std::string total = node("aten::sum", kSum, {lm, none()}, scalar);
    const std::string count = node("aten::sum", kSum, {valid, none()}, scalar, "int64");
    added_.push_back(graph_node{"aten::div", {total, count}, {n_.outputs[0]}, kDiv});
    return true;
  }

  // adaptive_avg_pool{1,2,3}d to one element per plane (output size all ones): the mean
  // over the last `k` dims, kept, as ATen itself computes it (input.mean(dims, true)).
  bool global_average(size_t k) {
    if (n_.inputs.size() != 2 || n_.outputs.size() != 1) return false;
    const graph_value* x = g_.value(n_.inputs[0]);
    const graph_value* size = g_.value(n_.inputs[1]);
    if (!x || !x->is_tensor() || !is_float(x->dtype) || x->shape.size() < k + 1 || !g_.value(n_.outputs[0]))
      return false;
    if (!size || !size->constant || size->type != "int[]" || size->numbers.empty() || size->numbers.size() > k)
      return false;
    for (double v : size->numbers)
      if (v != 1) return false;
    std::vector<int64_t> dims;
    for (size_t d = x->shape.size() - k; d < x->shape.size(); ++d) dims.push_back(static_cast<int64_t>(d));
    graph_node r;
    r.kind = "aten::mean";
    r.schema = kMeanDim;
    r.inputs = {n_.inputs[0], ints(dims), number("bool", 1), none()};
    r.outputs = {n_.outputs[0]};
    added_.push_back(std::move(r));
    return true;
  }

  // The elementwise loss `loss` reduced as `reduction` says, into the node's output.
  bool finish(const std::string& loss, int reduction) {
    if (reduction == 0) {
      rename(loss, n_.outputs[0]);
    } else {
      graph_node r;
      r.kind = reduction == 1 ? "aten::mean" : "aten::sum";
      r.schema = reduction == 1 ? kMean : kSum;
      r.inputs = {loss, none()};
      r.outputs = {n_.outputs[0]};
      added_.push_back(std::move(r));
    }
    return true;
  }

  std::string fresh(const std::string& what) { return prefix_ + std::to_string(next_++) + "." + what; }

  std::string number(const std::string& type, double v) {
    graph_value c;
    c.id = fresh(type);
    c.type = type;
    c.numbers = {v};
    c.constant = true;
    g_.values[c.id] = c;
    return c.id;
  }

  std::string none() {
    graph_value c;
    c.id = fresh("none");
    c.type = "None";
    c.constant = true;
    g_.values[c.id] = c;
    return c.id;
  }

  std::string ints(const std::vector<int64_t>& v) {
    graph_value c;
    c.id = fresh("int[]");
    c.type = "int[]";
    for (int64_t x : v) c.numbers.push_back(static_cast<double>(x));
    c.constant = true;
    g_.values[c.id] = c;
    return c.id;
  }

  // A new node of one tensor result, of the loss's inputs' shape and dtype unless
  // `shape` (`dtype`) says.
  std::string node(const std::string& kind, const char* schema, std::vector<std::string> inputs,
                   std::optional<std::vector<int64_t>> shape = std::nullopt, const std::string& dtype = "") {
    graph_value t;
    t.id = fresh(kind.substr(6));
    t.type = "Tensor";
    t.shape = shape ? *shape : shape_;
    t.dtype = dtype.empty() ? dtype_ : dtype;
    g_.values[t.id] = t;
    graph_node n;
    n.kind = kind;
    n.schema = schema;
    n.inputs = std::move(inputs);
    n.outputs = {t.id};
    added_.push_back(std::move(n));
    return t.id;
  }

  // The last node writes the loss's own value instead of a fresh one.
  void rename(const std::string& from, const std::string& to) {
    for (auto& in : added_.back().outputs)
      if (in == from) in = to;
    g_.values.erase(from);
  }

  task_graph& g_;
  const graph_node& n_;
  std::string prefix_;
  std::vector<int64_t> shape_;
  std::string dtype_;
  int next_ = 0;
  std::vector<graph_node> added_;
};

}  // namespace

task_graph expand_composites(const task_graph& graph) {
  task_graph out = graph;
  out.nodes.clear();
  int index = 0;
  for (const auto& n : graph.nodes) {
    expansion e(out, n, index);
    if (e.run()) {
      ++index;
      for (auto& added : e.nodes()) out.nodes.push_back(std::move(added));
    } else {
      out.nodes.push_back(n);
    }
  }
  return out;
}

}  // namespace ks::rules
