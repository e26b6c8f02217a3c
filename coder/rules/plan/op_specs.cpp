#include "coder/rules/plan/op_specs.hpp"

#include <algorithm>

#include "coder/rules/plan/expr_text.hpp"

namespace ks::rules {

int64_t normalize_dim(int64_t d, size_t rank) { return d < 0 ? d + static_cast<int64_t>(rank) : d; }

namespace {

// The normalisations over a row: layer_norm over its normalized_shape, group_norm
// over (batch, group) rows, instance_norm and batch_norm over (batch, channel) rows.
status read_norm(const lowering_context& cx, const graph_node& n, const std::string& kind, const std::string& k,
                 size_t rank, reduction_spec& r) {
  const graph_value& x = cx.val(r.input);
  if (k == "layer_norm") {
    r.op = k;
    size_t nd = cx.val(n.inputs[1]).numbers.size();
    r.first = static_cast<int64_t>(rank - nd);
    r.last = static_cast<int64_t>(rank);
    if (!cx.val(n.inputs[2]).is_none()) r.weight = n.inputs[2];
    if (!cx.val(n.inputs[3]).is_none()) r.bias = n.inputs[3];
    r.eps = cx.val(n.inputs[4]).numbers.at(0);
  } else if (k == "group_norm") {
    r.op = k;
    if (rank < 2)
      return error{kind + " of a tensor of rank " + std::to_string(rank) + " is not supported by the rules coder"};
    const auto& g = cx.val(n.inputs[1]).numbers;
    r.groups = g.empty() ? 0 : static_cast<int64_t>(g[0]);
    if (r.groups <= 0 || x.shape[1] % r.groups != 0)
      return error{kind + ": the channels (" + std::to_string(x.shape[1]) + ") do not split into the groups"};
    if (!cx.val(n.inputs[2]).is_none()) r.weight = n.inputs[2];
    if (!cx.val(n.inputs[3]).is_none()) r.bias = n.inputs[3];
    r.eps = cx.val(n.inputs[4]).numbers.at(0);
    r.first = 1;
    r.last = static_cast<int64_t>(rank);
  } else if (k == "instance_norm") {
    r.op = k;
    if (rank < 3)
      return error{kind + " of a tensor of rank " + std::to_string(rank) + " is not supported by the rules coder"};
    if (!on_batch_statistics(cx.g, n))
      return error{kind + " on running statistics is not supported by the rules coder"};
    if (!cx.val(n.inputs[1]).is_none()) r.weight = n.inputs[1];
    if (!cx.val(n.inputs[2]).is_none()) r.bias = n.inputs[2];
    r.eps = cx.val(n.inputs[7]).numbers.at(0);
    r.channel_affine = true;
    r.first = 2;
    r.last = static_cast<int64_t>(rank);
  } else if (k == "batch_norm") {
    // batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
    // eps, cudnn_enabled) normalises by the batch's statistics in training mode (as
    // KernelBench runs it) or where there are no running statistics. The running
    // statistics' update is module state, not an output: the kernel does not repeat it.
    r.op = k;
    if (rank < 3)
      return error{kind + " of a tensor of rank " + std::to_string(rank) + " is not supported by the rules coder"};
    if (!on_batch_statistics(cx.g, n))
      return error{kind + " on running statistics is not supported by the rules coder"};
    if (!cx.val(n.inputs[1]).is_none()) r.weight = n.inputs[1];
    if (!cx.val(n.inputs[2]).is_none()) r.bias = n.inputs[2];
    r.eps = cx.val(n.inputs[7]).numbers.at(0);
    r.channel_affine = true;
    r.batch_stats = true;
    r.first = 2;
    r.last = static_cast<int64_t>(rank);
  }
  return {};
}

}  // namespace

bool on_batch_statistics(const task_graph& g, const graph_node& n) {
  const std::string k = base_kind(n.kind);
  if (k == "aten::group_norm") return true;
  if ((k != "aten::batch_norm" && k != "aten::instance_norm") || n.inputs.size() <= 5) return false;
  // batch_norm's `training`, instance_norm's `use_input_stats`
  const graph_value* flag = g.value(n.inputs[5]);
  if (flag && !flag->numbers.empty() && flag->numbers.front() != 0) return true;
  // batch_norm without running statistics uses the batch's whatever `training` says
  const graph_value* running_mean = g.value(n.inputs[3]);
  return k == "aten::batch_norm" && running_mean && running_mean->is_none();
}

bool deep_normalisation_chain(const task_graph& g) {
  int norms = 0;
  for (const graph_node& n : g.nodes)
    if (on_batch_statistics(g, n) && ++norms >= kDeepNormalisations) return true;
  return false;
}

result<reduction_spec> read_reduction(const lowering_context& cx, const graph_node& n, const std::string& kind) {
  reduction_spec r;
  r.input = n.inputs[0];
  r.output = n.outputs[0];
  const graph_value& x = cx.val(r.input);
  if (!x.is_tensor()) return error{kind + ": input is not a tensor"};
  const size_t rank = x.shape.size();
  auto dims_from = [&](const std::string& id, bool& all) -> std::vector<int64_t> {
    const graph_value& v = cx.val(id);
    std::vector<int64_t> d;
    all = v.is_none() || (v.type == "int[]" && v.numbers.empty());
    for (double e : v.numbers) d.push_back(normalize_dim(static_cast<int64_t>(e), rank));
    return d;
  };
  auto set_dims = [&](std::vector<int64_t> d, bool all) -> status {
    if (all) {
      r.first = 0;
      r.last = static_cast<int64_t>(rank);
      return {};
    }
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    for (size_t i = 1; i < d.size(); ++i)
      if (d[i] != d[i - 1] + 1) return error{kind + " over non-adjacent dims is not supported by the rules coder"};
    r.first = d.front();
    r.last = d.back() + 1;
    return {};
  };
  auto flag = [&](size_t i) {
    return i < n.inputs.size() && !cx.val(n.inputs[i]).numbers.empty() && cx.val(n.inputs[i]).numbers[0] != 0;
  };
  bool all = false;
  std::string k = kind.substr(6);
  if (k == "sum" || k == "mean") {
    r.op = k;
    if (n.inputs.size() >= 3 && (cx.val(n.inputs[1]).type == "int[]" || cx.val(n.inputs[1]).is_none())) {
      auto d = dims_from(n.inputs[1], all);
      if (auto s = set_dims(d, all); !s) return error{s.message()};
      r.keepdim = flag(2);
    } else if (auto s = set_dims({}, true); !s)
      return error{s.message()};
  } else if (k == "amax" || k == "amin") {
    r.op = k == "amax" ? "max" : "min";
    auto d = dims_from(n.inputs[1], all);
    if (auto s = set_dims(d, all); !s) return error{s.message()};
    r.keepdim = flag(2);
  } else if (k == "max" || k == "min") {
    r.op = k;
    if (n.inputs.size() == 1) {
      (void)set_dims({}, true);
    } else if (cx.val(n.inputs[1]).type == "int") {
      if (n.outputs.size() > 1 &&
          (cx.consumers.count(n.outputs[1]) || std::count(cx.outputs.begin(), cx.outputs.end(), n.outputs[1])))
        return error{kind + " with its indices used is not supported by the rules coder"};
      (void)set_dims({normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers[0]), rank)}, false);
      r.keepdim = flag(2);
    } else {
      return error{kind + " of two tensors is elementwise (use maximum/minimum)"};
    }
  } else if (k == "argmax" || k == "argmin") {
    r.op = k;
    // argmax(self, dim=None, keepdim=False). Over the whole tensor the indices are flat
    // ones, which the library serves.
    if (n.inputs.size() < 2 || cx.val(n.inputs[1]).is_none() || cx.val(n.inputs[1]).numbers.empty())
      return error{kind + " over the whole tensor (no dim) is not supported by the rules coder"};
    (void)set_dims({normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers[0]), rank)}, false);
    r.keepdim = flag(2);
  } else if (k == "logsumexp") {
    r.op = "lse";
    auto d = dims_from(n.inputs[1], all);
    if (auto s = set_dims(d, all); !s) return error{s.message()};
    r.keepdim = flag(2);
  } else if (k == "softmax" || k == "log_softmax") {
    r.op = k;
    (void)set_dims({normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers.at(0)), rank)}, false);
  } else if (k == "layer_norm" || k == "group_norm" || k == "instance_norm" || k == "batch_norm") {
    if (auto s = read_norm(cx, n, kind, k, rank, r); !s) return error{s.message()};
  } else if (k == "var" || k == "std") {
    r.op = k;
    if (n.inputs.size() == 2) {  // var(x, unbiased)
      (void)set_dims({}, true);
      r.correction = flag(1) ? 1 : 0;
    } else {
      auto d = dims_from(n.inputs[1], all);
      if (auto s = set_dims(d, all); !s) return error{s.message()};
      const graph_value& c = cx.val(n.inputs[2]);
      if (c.type == "bool")
        r.correction = flag(2) ? 1 : 0;
      else if (c.is_none())
        r.correction = 1;
      else
        r.correction = c.numbers.at(0);
      r.keepdim = flag(3);
    }
  } else if (k == "norm" || k == "linalg_vector_norm") {
    const graph_value& p = cx.val(n.inputs[1]);
    double order = p.is_none() ? 2 : p.numbers.at(0);
    if (order != 1 && order != 2)
      return error{kind + " of order " + std::to_string(order) + " is not supported by the rules coder"};
    r.op = order == 1 ? "norm1" : "norm2";
    if (n.inputs.size() >= 4) {
      auto d = dims_from(n.inputs[2], all);
      if (auto s = set_dims(d, all); !s) return error{s.message()};
      r.keepdim = flag(3);
    } else {
      (void)set_dims({}, true);
    }
  } else {
    return error{kind + " is not supported by the rules coder"};
  }
  if (r.op == "sum" || r.op == "mean" || r.op == "norm1" || r.op == "norm2")
    r.acc = acc_kind::sum;
  else if (r.op == "max")
    r.acc = acc_kind::max;
  else if (r.op == "min")
    r.acc = acc_kind::min;
  else if (r.op == "argmax" || r.op == "argmin")
    r.acc = acc_kind::arg;
  else if (r.op == "lse" || r.op == "softmax" || r.op == "log_softmax")
    r.acc = acc_kind::online;
  else
    r.acc = acc_kind::moments;
  return r;
}

result<pool_spec> read_pool(const lowering_context& cx, const graph_node& n, const std::string& kind) {
  pool_spec p;
  p.max = kind.rfind("aten::max_pool", 0) == 0;
  p.dims = kind.back() == 'd' && kind.size() >= 2 ? kind[kind.size() - 2] - '0' : 2;
  if (p.dims < 1 || p.dims > 3) return error{kind + " is not a pool the rules coder takes"};
  const int D = p.dims;
  // One integer for every dim, or one for each.
  auto pair = [&](size_t k, int64_t* out, bool may_be_empty) -> status {
    const auto& v = cx.val(n.inputs.at(k)).numbers;
    if (v.empty() && may_be_empty) return {};
    if (v.empty() || (v.size() != 1 && static_cast<int>(v.size()) != D))
      return error{kind + ": argument " + std::to_string(k) + " is not 1" +
                   (D > 1 ? " or " + std::to_string(D) : std::string()) + " integers"};
    for (int d = 0; d < D; ++d) out[d] = static_cast<int64_t>(v.size() == 1 ? v[0] : v[d]);
    return {};
  };
  if (auto s = pair(1, p.kernel, false); !s) return error{s.message()};
  for (int d = 0; d < D; ++d) p.stride[d] = p.kernel[d];
  if (auto s = pair(2, p.stride, true); !s) return error{s.message()};
  if (auto s = pair(3, p.pad, false); !s) return error{s.message()};
  if (p.max) {
    if (auto s = pair(4, p.dil, false); !s) return error{s.message()};
    if (!cx.val(n.inputs.at(5)).numbers.empty() && cx.val(n.inputs[5]).numbers[0] != 0)
      return error{kind + " with ceil_mode is not supported by the rules coder"};
    if (n.outputs.size() > 1) return error{kind + " with indices is not supported by the rules coder"};
  } else {
    if (!cx.val(n.inputs.at(4)).numbers.empty() && cx.val(n.inputs[4]).numbers[0] != 0)
      return error{kind + " with ceil_mode is not supported by the rules coder"};
    p.count_include_pad = cx.val(n.inputs.at(5)).numbers.empty() || cx.val(n.inputs[5]).numbers[0] != 0;
    // (avg_pool1d has no divisor_override.)
    if (n.inputs.size() > 6 && !cx.val(n.inputs[6]).is_none()) p.divisor = cx.val(n.inputs[6]).numbers.at(0);
  }
  return p;
}

}  // namespace ks::rules
