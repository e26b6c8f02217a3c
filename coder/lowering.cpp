#include "coder/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>

#include "plan/op_schema.hpp"
#include "plan/shape_expr.hpp"
#include "coder/rules/combine.hpp"
#include "coder/rules/kernel_text.hpp"
#include "coder/rules/op_specs.hpp"

namespace ks {

std::map<std::string, std::string> to_recipe(const lowering_params& p) {
  return {{"vector_width", std::to_string(p.vector_width)},
          {"row_cache", p.row_cache},
          {"cache_hint", p.cache_hint},
          {"block_size", std::to_string(p.block_size)},
          {"elements_per_thread", std::to_string(p.elements_per_thread)},
          {"grid_cap", std::to_string(p.grid_cap)},
          {"row_mapping", p.row_mapping},
          {"fast_math", p.fast_math ? "1" : "0"},
          {"fuse_prologue", p.fuse_prologue ? "1" : "0"}};
}

result<lowering_params> from_recipe(const std::map<std::string, std::string>& recipe) {
  lowering_params p;
  auto integer = [&](const char* key, int& out, int lo, int hi) -> status {
    auto it = recipe.find(key);
    if (it == recipe.end()) return {};
    try {
      size_t used = 0;
      int v = std::stoi(it->second, &used);
      if (used != it->second.size() || v < lo || v > hi) throw std::out_of_range("");
      out = v;
      return {};
    } catch (const std::exception&) {
      return error{"recipe: " + std::string(key) + " = '" + it->second + "': expected an integer in [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    }
  };
  int fast = p.fast_math, fuse = p.fuse_prologue;
  for (auto s : {integer("vector_width", p.vector_width, 1, 4), integer("block_size", p.block_size, 32, 1024),
                 integer("elements_per_thread", p.elements_per_thread, 1, 16),
                 integer("grid_cap", p.grid_cap, 1, 1 << 20), integer("fast_math", fast, 0, 1),
                 integer("fuse_prologue", fuse, 0, 1)})
    if (!s) return error{s.message()};
  if (p.vector_width == 3) return error{"recipe: vector_width = 3: expected 1, 2 or 4"};
  if (p.block_size % 32) return error{"recipe: block_size = " + std::to_string(p.block_size) + ": expected a multiple of 32"};
  p.fast_math = fast;
  p.fuse_prologue = fuse;
  if (auto it = recipe.find("row_mapping"); it != recipe.end()) {
    if (it->second != "block" && it->second != "warp")
      return error{"recipe: row_mapping = '" + it->second + "': expected block or warp"};
    p.row_mapping = it->second;
  }
  if (auto it = recipe.find("row_cache"); it != recipe.end()) {
    if (it->second != "none" && it->second != "registers" && it->second != "shared" && it->second != "on_chip")
      return error{"recipe: row_cache = '" + it->second + "': expected none, registers, shared or on_chip"};
    p.row_cache = it->second;
  }
  if (auto it = recipe.find("cache_hint"); it != recipe.end()) {
    if (it->second != "none" && it->second != "streaming" && it->second != "readonly")
      return error{"recipe: cache_hint = '" + it->second + "': expected none, streaming or readonly"};
    p.cache_hint = it->second;
  }
  return p;
}

namespace {

using namespace rules;

// ---------------------------------------------------------------------------------
// Shapes as expressions over the inputs.

struct shaped {
  std::vector<int64_t> shape;
  std::vector<std::string> sym;
};

// ---------------------------------------------------------------------------------

struct stage {
  enum kind_t { elementwise, reduce, library, pool, scan } kind = elementwise;
  std::vector<const graph_node*> nodes;  // elementwise: the chain; else one node
  shaped iter;                           // elementwise: the iteration shape
  int prologue = -1;                     // reduce: index of the fused elementwise stage
  bool fused_away = false;               // elementwise: emitted inside a reduction
  int epilogue = -1;                     // reduce: index of the elementwise stage fused after it
  bool is_epilogue = false;              // elementwise: emitted in a reduction's second pass
  // library: why no template takes this op, when it is a fallback (an ATen call by
  // its schema) rather than a product or convolution.
  std::string fallback = "";
};

const char* kHeader = R"(// Written by KernelSkill's rules coder from the reference's TorchScript graph.
#define KS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ void ks_ms_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -KS_INF) return;  // both empty: exp(-inf - -inf) would be NaN
  s = s * KS_EXP(m - M) + s2 * KS_EXP(m2 - M);
  m = M;
}
)";

// A row staged in shared memory holds at most this many floats (64 KiB).
constexpr int64_t kSharedRow = 16384;

// Dynamic shared memory and the copies into it. cp.async (sm_80 on) keeps every copy
// in flight without holding a register; older GPUs copy through registers. A host
// build of the source (the tests' emulator) defines KS_DYNAMIC_SHARED itself.
const char* kSharedHelpers = R"(
#ifndef KS_DYNAMIC_SHARED
#define KS_DYNAMIC_SHARED(name) extern __shared__ float4 name[]
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ void ks_cp_async16(float* d, const float* s) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(d)), "l"(s));
}
__device__ __forceinline__ void ks_cp_async4(float* d, const float* s) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((unsigned)__cvta_generic_to_shared(d)), "l"(s));
}
__device__ __forceinline__ void ks_cp_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#else
__device__ __forceinline__ void ks_cp_async16(float* d, const float* s) {
  *reinterpret_cast<float4*>(d) = *reinterpret_cast<const float4*>(s);
}
__device__ __forceinline__ void ks_cp_async4(float* d, const float* s) { *d = *s; }
__device__ __forceinline__ void ks_cp_async_wait() {}
#endif
)";

class lowerer {
 public:
  lowerer(const task_graph& g, const lowering_params& p, const target_shapes& target) : g_(g), p_(p), target_(target) {}

  result<lowered_kernel_set> run() {
    if (auto s = prepare(); !s) return error{s.message()};
    if (auto s = make_stages(); !s) return error{s.message()};
    plan_buffers();
    std::set<std::string> kinds;
    for (size_t i = 0; i < stages_.size(); ++i) {
      stage& st = stages_[i];
      if (st.fused_away || st.is_epilogue) continue;
      status s;
      if (st.kind == stage::elementwise) {
        s = emit_elementwise(i);
        out_.stages.push_back("elementwise");
        kinds.insert("elementwise");
      } else if (st.kind == stage::reduce) {
        s = emit_reduce(i);
        out_.stages.push_back(std::string("row_reduce") + (st.prologue >= 0 ? "+prologue" : "") +
                              (st.epilogue >= 0 ? "+epilogue" : ""));
        kinds.insert("row_reduce");
      } else if (st.kind == stage::scan) {
        s = emit_scan(i);
        out_.stages.push_back(st.epilogue >= 0 ? "scan+epilogue" : "scan");
        kinds.insert("scan");
      } else if (st.kind == stage::pool) {
        s = emit_pool(i);
        out_.stages.push_back(st.epilogue >= 0 ? "pool+epilogue" : "pool");
        kinds.insert("pool");
      } else if (!st.fallback.empty()) {
        s = emit_fallback(i);
        out_.stages.push_back("fallback:" + base_kind(st.nodes[0]->kind));
        out_.fallback.push_back(base_kind(st.nodes[0]->kind) + ": " + st.fallback);
        kinds.insert("fallback");
      } else {
        s = emit_library(i);
        out_.stages.push_back("library:" + base_kind(st.nodes[0]->kind));
        kinds.insert("library");
      }
      if (!s) return error{s.message()};
    }
    for (const std::string& o : outputs_)
      if (!written_.count(o))
        return error{"graph output " + o + " is not computed by any kernel (an input returned as is?)"};
    if (kinds.count("library")) out_.template_name = "library";
    else if (kinds.size() == 1) out_.template_name = *kinds.begin();
    else out_.template_name = "mixed";
    if (kinds.count("library") && kinds.count("row_reduce")) out_.template_name = "mixed";
    // A fallback alone is one library call; beside kernels it makes the candidate mixed.
    if (kinds.count("fallback")) out_.template_name = kinds.size() == 1 ? "library" : "mixed";
    std::string fast = p_.fast_math ? "#define KS_EXP __expf\n#define KS_DIV(a, b) __fdividef((a), (b))\n"
                                    : "#define KS_EXP expf\n#define KS_DIV(a, b) ((a) / (b))\n";
    out_.source = fast + kHeader + (uses_smem_ ? kSharedHelpers : "") + src_;
    return out_;
  }

 private:
  const task_graph& g_;
  const lowering_params& p_;
  const target_shapes& target_;
  // The size of `dims` (shape expressions) at the target shapes, or `fallback` (the
  // graph's own) when they do not say.
  int64_t target_size(const std::vector<std::string>& dims, int64_t fallback) const {
    if (target_.empty()) return fallback;
    expr_env env;
    env.tensors = target_;
    auto v = eval_expr(product(dims), env);
    if (!v || v->is_float || v->i <= 0) return fallback;
    return v->i;
  }
  lowered_kernel_set out_;
  std::string src_;
  bool uses_smem_ = false;  // a kernel stages rows in shared memory: the source needs kSharedHelpers
  std::map<std::string, shaped> shapes_;         // tensor value → shape
  std::map<std::string, std::string> scalar_sym_;  // scalar value → expression (aten::size)
  std::map<std::string, std::string> input_name_;  // value → task tensor name
  std::map<std::string, int> producer_;            // value → stage index
  std::map<std::string, std::vector<int>> consumers_;  // value → stages reading it
  std::vector<std::string> outputs_;               // graph output values
  std::vector<stage> stages_;
  std::map<std::string, std::string> tensor_of_;   // materialized value → plan tensor name
  std::map<std::string, std::vector<std::string>> list_of_;  // prim::ListConstruct result → elements
  // How chain_code reads tensors: "none"; "streaming" (__ldcs on full-shape operands);
  // "readonly" (__ldg on all); "readonly_broadcast" (__ldg on broadcast operands only,
  // where the vector path loads the full-shape ones itself). Elementwise kernels only.
  std::string load_hint_ = "none";
  size_t split_ = 0;  // elementwise kernels over rows x c: the first dim of c (choose_split)
  std::set<std::string> written_;

  const graph_value& val(const std::string& id) const { return g_.values.at(id); }

  // -------------------------------------------------------------------------------
  status prepare() {
    for (size_t i = 0; i < g_.input_values.size(); ++i) {
      const std::string& id = g_.input_values[i];
      const graph_value& v = val(id);
      if (!v.is_tensor()) return error{"input " + g_.input_names[i] + " is not a tensor"};
      if (v.dtype != "float32")
        return error{"input " + g_.input_names[i] + " is " + v.dtype + "; the rules coder writes float32 kernels only"};
      shaped s{v.shape, {}};
      for (size_t d = 0; d < v.shape.size(); ++d)
        s.sym.push_back(g_.input_names[i] + ".shape[" + std::to_string(d) + "]");
      shapes_[id] = s;
      input_name_[id] = g_.input_names[i];
      tensor_of_[id] = g_.input_names[i];
    }
    outputs_ = g_.outputs;
    if (outputs_.size() == 1) {
      for (auto& n : g_.nodes)
        if (n.kind == "prim::TupleConstruct" && n.outputs[0] == outputs_[0]) outputs_ = n.inputs;
    }
    for (auto& o : outputs_) {
      const graph_value* v = g_.value(o);
      if (!v || !v->is_tensor()) return error{"graph output " + o + " is not a tensor"};
    }
    return {};
  }

  bool is_tensor(const std::string& id) const { return val(id).is_tensor(); }

  // The broadcast shape of the tensor operands, with expressions taken from an operand
  // that has the dimension.
  shaped broadcast(const std::vector<std::string>& ids, const std::vector<int64_t>& target) const {
    shaped s{target, std::vector<std::string>(target.size(), "1")};
    for (size_t d = 0; d < target.size(); ++d) {
      if (target[d] == 1) continue;
      for (auto& id : ids) {
        auto it = shapes_.find(id);
        if (it == shapes_.end()) continue;
        const shaped& in = it->second;
        int64_t off = static_cast<int64_t>(target.size()) - static_cast<int64_t>(in.shape.size());
        int64_t k = static_cast<int64_t>(d) - off;
        if (k >= 0 && in.shape[k] == target[d]) {
          s.sym[d] = in.sym[k];
          break;
        }
      }
    }
    return s;
  }

  status shape_of_node(const graph_node& n, const std::string& kind) {
    const std::string& out = n.outputs[0];
    const graph_value& ov = val(out);
    if (!ov.is_tensor()) return error{kind + ": result is not a tensor"};
    if (ov.dtype != "float32") return error{kind + " (value " + out + ") gives " + ov.dtype + "; the rules coder writes float32 kernels only"};
    std::vector<std::string> tin;
    for (auto& i : n.inputs)
      if (is_tensor(i)) tin.push_back(i);
    if (elementwise_ops().count(kind)) {
      shaped s = broadcast(tin, ov.shape);
      for (size_t d = 0; d < s.sym.size(); ++d)
        if (ov.shape[d] != 1 && s.sym[d] == "1") {
          // expand(x, sizes): a new dimension given by a size list.
          return error{kind + " (value " + out + "): cannot tell which input gives dimension " + std::to_string(d)};
        }
      shapes_[out] = s;
      return {};
    }
    if (reduction_ops().count(kind)) {
      auto spec = read_reduction(n, kind);
      if (!spec) return error{spec.message()};
      const shaped& in = shapes_.at(spec->input);
      shaped s;
      for (int64_t d = 0; d < static_cast<int64_t>(in.shape.size()); ++d) {
        bool reduced = d >= spec->first && d < spec->last;
        if (spec->normalizes() || !reduced) {
          s.shape.push_back(in.shape[d]);
          s.sym.push_back(in.sym[d]);
        } else if (spec->keepdim) {
          s.shape.push_back(1);
          s.sym.push_back("1");
        }
      }
      if (s.shape != ov.shape) return error{kind + " (value " + out + "): shape mismatch in the lowering"};
      shapes_[out] = s;
      return {};
    }
    if (kind == "aten::cumsum" || kind == "aten::cumprod") {
      if (n.inputs.size() > 2 && !val(n.inputs[2]).is_none()) return error{kind + " with a dtype is not supported by the rules coder"};
      shapes_[out] = shapes_.at(n.inputs[0]);
      return {};
    }
    if (kind == "aten::max_pool2d" || kind == "aten::avg_pool2d") {
      auto pp = read_pool(n, kind);
      if (!pp) return error{pp.message()};
      const shaped& x = shapes_.at(n.inputs[0]);
      shaped s{ov.shape, {x.sym.begin(), x.sym.end() - 2}};
      for (int k = 0; k < 2; ++k)
        s.sym.push_back("(" + x.sym[x.sym.size() - 2 + k] + " + " + std::to_string(2 * pp->pad[k]) + " - " +
                        std::to_string(pp->dil[k] * (pp->kernel[k] - 1) + 1) + ") / " + std::to_string(pp->stride[k]) + " + 1");
      shapes_[out] = s;
      return {};
    }
    if (library_ops().count(kind)) {
      shaped s{ov.shape, {}};
      auto sh = [&](int i) -> const shaped& { return shapes_.at(n.inputs[i]); };
      if (kind == "aten::conv2d") {
        const shaped &x = sh(0), &w = sh(1);
        auto ints = [&](int i) { return val(n.inputs[i]).numbers; };
        auto st = ints(3), pd = ints(4), dl = ints(5);
        if (val(n.inputs[4]).type == "str") return error{"aten::conv2d with string padding is not supported"};
        size_t r = x.shape.size();
        s.sym.push_back(x.sym[0]);
        s.sym.push_back(w.sym[0]);
        for (int k = 0; k < 2; ++k) {
          auto at = [&](const std::vector<double>& v) { return static_cast<int64_t>(v.size() == 1 ? v[0] : v[k]); };
          std::string hin = x.sym[r - 2 + k], kk = w.sym[2 + k];
          s.sym.push_back("(" + hin + " + " + std::to_string(2 * at(pd)) + " - " + std::to_string(at(dl)) +
                          " * (" + kk + " - 1) - 1) / " + std::to_string(at(st)) + " + 1");
        }
        if (r == 3) s.sym.erase(s.sym.begin());
      } else if (kind == "aten::linear") {
        const shaped &x = sh(0), &w = sh(1);
        s.sym.assign(x.sym.begin(), x.sym.end() - 1);
        if (w.shape.size() == 2) s.sym.push_back(w.sym[0]);
      } else if (kind == "aten::addmm") {
        s.sym = {sh(1).sym[0], sh(2).sym[1]};
      } else {  // matmul, mm, bmm
        const shaped &a = sh(0), &b = sh(1);
        if (a.shape.size() < 2 || b.shape.size() < 2)
          return error{kind + " of a 1-D operand is not supported by the rules coder"};
        std::vector<int64_t> batch(ov.shape.begin(), ov.shape.end() - 2);
        shaped ba{std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2), std::vector<std::string>(a.sym.begin(), a.sym.end() - 2)};
        shaped bb{std::vector<int64_t>(b.shape.begin(), b.shape.end() - 2), std::vector<std::string>(b.sym.begin(), b.sym.end() - 2)};
        shapes_["__a"] = ba;
        shapes_["__b"] = bb;
        s.sym = broadcast({"__a", "__b"}, batch).sym;
        shapes_.erase("__a");
        shapes_.erase("__b");
        s.sym.push_back(a.sym[a.sym.size() - 2]);
        s.sym.push_back(b.sym.back());
      }
      if (s.sym.size() != ov.shape.size()) return error{kind + " (value " + out + "): unexpected result rank"};
      shapes_[out] = s;
      return {};
    }
    return error{"op " + kind + " (value " + out + ") is not supported by the rules coder"};
  }

  result<reduction_spec> read_reduction(const graph_node& n, const std::string& kind) const {
    reduction_spec r;
    r.input = n.inputs[0];
    r.output = n.outputs[0];
    const graph_value& x = val(r.input);
    if (!x.is_tensor()) return error{kind + ": input is not a tensor"};
    const size_t rank = x.shape.size();
    auto dims_from = [&](const std::string& id, bool& all) -> std::vector<int64_t> {
      const graph_value& v = val(id);
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
    auto flag = [&](size_t i) { return i < n.inputs.size() && !val(n.inputs[i]).numbers.empty() && val(n.inputs[i]).numbers[0] != 0; };
    bool all = false;
    std::string k = kind.substr(6);
    if (k == "sum" || k == "mean") {
      r.op = k;
      if (n.inputs.size() >= 3 && (val(n.inputs[1]).type == "int[]" || val(n.inputs[1]).is_none())) {
        auto d = dims_from(n.inputs[1], all);
        if (auto s = set_dims(d, all); !s) return error{s.message()};
        r.keepdim = flag(2);
      } else if (auto s = set_dims({}, true); !s) return error{s.message()};
    } else if (k == "amax" || k == "amin") {
      r.op = k == "amax" ? "max" : "min";
      auto d = dims_from(n.inputs[1], all);
      if (auto s = set_dims(d, all); !s) return error{s.message()};
      r.keepdim = flag(2);
    } else if (k == "max" || k == "min") {
      r.op = k;
      if (n.inputs.size() == 1) {
        (void)set_dims({}, true);
      } else if (val(n.inputs[1]).type == "int") {
        if (n.outputs.size() > 1 && (consumers_.count(n.outputs[1]) ||
                                     std::count(outputs_.begin(), outputs_.end(), n.outputs[1])))
          return error{kind + " with its indices used is not supported by the rules coder"};
        (void)set_dims({normalize_dim(static_cast<int64_t>(val(n.inputs[1]).numbers[0]), rank)}, false);
        r.keepdim = flag(2);
      } else {
        return error{kind + " of two tensors is elementwise (use maximum/minimum)"};
      }
    } else if (k == "logsumexp") {
      r.op = "lse";
      auto d = dims_from(n.inputs[1], all);
      if (auto s = set_dims(d, all); !s) return error{s.message()};
      r.keepdim = flag(2);
    } else if (k == "softmax" || k == "log_softmax") {
      r.op = k;
      (void)set_dims({normalize_dim(static_cast<int64_t>(val(n.inputs[1]).numbers.at(0)), rank)}, false);
    } else if (k == "layer_norm") {
      r.op = k;
      size_t nd = val(n.inputs[1]).numbers.size();
      r.first = static_cast<int64_t>(rank - nd);
      r.last = static_cast<int64_t>(rank);
      if (!val(n.inputs[2]).is_none()) r.weight = n.inputs[2];
      if (!val(n.inputs[3]).is_none()) r.bias = n.inputs[3];
      r.eps = val(n.inputs[4]).numbers.at(0);
    } else if (k == "var" || k == "std") {
      r.op = k;
      if (n.inputs.size() == 2) {  // var(x, unbiased)
        (void)set_dims({}, true);
        r.correction = flag(1) ? 1 : 0;
      } else {
        auto d = dims_from(n.inputs[1], all);
        if (auto s = set_dims(d, all); !s) return error{s.message()};
        const graph_value& c = val(n.inputs[2]);
        if (c.type == "bool") r.correction = flag(2) ? 1 : 0;
        else if (c.is_none()) r.correction = 1;
        else r.correction = c.numbers.at(0);
        r.keepdim = flag(3);
      }
    } else if (k == "norm" || k == "linalg_vector_norm") {
      const graph_value& p = val(n.inputs[1]);
      double order = p.is_none() ? 2 : p.numbers.at(0);
      if (order != 1 && order != 2) return error{kind + " of order " + std::to_string(order) + " is not supported by the rules coder"};
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
    if (r.op == "sum" || r.op == "mean" || r.op == "norm1" || r.op == "norm2") r.acc = acc_kind::sum;
    else if (r.op == "max") r.acc = acc_kind::max;
    else if (r.op == "min") r.acc = acc_kind::min;
    else if (r.op == "lse" || r.op == "softmax" || r.op == "log_softmax") r.acc = acc_kind::online;
    else r.acc = acc_kind::moments;
    return r;
  }

  // -------------------------------------------------------------------------------
  status make_stages() {
    for (const graph_node& n : g_.nodes) {
      std::string kind = base_kind(n.kind);
      if (kind == "aten::size") {
        const graph_value& t = val(n.inputs[0]);
        auto it = shapes_.find(n.inputs[0]);
        if (it != shapes_.end() && n.inputs.size() == 2) {
          int64_t d = normalize_dim(static_cast<int64_t>(val(n.inputs[1]).numbers.at(0)), t.shape.size());
          scalar_sym_[n.outputs[0]] = it->second.sym.at(d);
        }
        continue;
      }
      if (is_meta(kind)) {
        if (kind == "prim::ListConstruct") list_of_[n.outputs[0]] = n.inputs;
        continue;
      }
      // Scalar arithmetic (x.dim() - 1) computes no tensor: its values are in the
      // graph, and whatever reads one refuses it unless it is a constant or a size.
      bool makes_tensor = false;
      for (auto& o : n.outputs) makes_tensor = makes_tensor || val(o).is_tensor();
      if (!makes_tensor) continue;
      // An op no template takes becomes a library step (ATen through its schema); the
      // chains before and after it stay fused kernels.
      if (std::string why = template_refusal(n, kind); !why.empty()) {
        if (auto s = fallback_shapes(n, why); !s) return s;
        for (auto& i : n.inputs) consumers_[i];
        stage st{stage::library, {&n}, {}, -1, false};
        st.fallback = why;
        stages_.push_back(st);
        continue;
      }
      for (auto& i : n.inputs) consumers_[i];  // mark read (filled below)
      if (elementwise_ops().count(kind)) {
        const shaped& os = shapes_.at(n.outputs[0]);
        bool join = !stages_.empty() && stages_.back().kind == stage::elementwise;
        if (join) {
          stage& cur = stages_.back();
          if (os.shape != cur.iter.shape) {
            // Growing the iteration shape recomputes the chain per element: only when
            // nothing of the chain so far is needed outside it at its own shape.
            bool grows = os.shape.size() >= cur.iter.shape.size();
            if (grows) {
              int64_t off = static_cast<int64_t>(os.shape.size() - cur.iter.shape.size());
              for (size_t d = 0; d < cur.iter.shape.size(); ++d)
                if (cur.iter.shape[d] != 1 && cur.iter.shape[d] != os.shape[d + off]) grows = false;
            }
            if (grows)
              for (auto* prev : cur.nodes)
                if (used_outside(prev->outputs[0], &n, cur)) grows = false;
            join = grows;
          }
        }
        if (!join) stages_.push_back(stage{stage::elementwise, {}, {}, -1, false});
        stages_.back().nodes.push_back(&n);
        stages_.back().iter = os;
      } else if (reduction_ops().count(kind)) {
        stages_.push_back(stage{stage::reduce, {&n}, {}, -1, false});
      } else if (kind == "aten::max_pool2d" || kind == "aten::avg_pool2d") {
        stages_.push_back(stage{stage::pool, {&n}, {}, -1, false});
      } else if (kind == "aten::cumsum" || kind == "aten::cumprod") {
        stages_.push_back(stage{stage::scan, {&n}, {}, -1, false});
      } else {
        stages_.push_back(stage{stage::library, {&n}, {}, -1, false});
      }
    }
    for (size_t i = 0; i < stages_.size(); ++i)
      for (auto* n : stages_[i].nodes)
        for (auto& o : n->outputs) producer_[o] = static_cast<int>(i);
    for (size_t i = 0; i < stages_.size(); ++i)
      for (auto* n : stages_[i].nodes)
        for (auto& list_or_value : n->inputs) {
          // A fallback's tensor list (cat, stack) reads its elements.
          std::vector<std::string> read = {list_or_value};
          if (auto l = list_of_.find(list_or_value); l != list_of_.end()) read = l->second;
          for (auto& in : read) {
            auto it = producer_.find(in);
            if (it != producer_.end() && it->second != static_cast<int>(i)) consumers_[in].push_back(static_cast<int>(i));
          }
        }
    // Meta nodes (aten::size, lists) read tensors only for their shapes: no data flow.
    if (p_.fuse_prologue) {
      for (size_t i = 0; i < stages_.size(); ++i) {
        stage& st = stages_[i];
        if (st.kind != stage::reduce) continue;
        const std::string& in = st.nodes[0]->inputs[0];
        auto it = producer_.find(in);
        if (it == producer_.end()) continue;
        stage& pro = stages_[it->second];
        if (pro.kind != stage::elementwise || pro.fused_away) continue;
        if (pro.iter.shape != shapes_.at(in).shape) continue;
        // Every value of the chain must be needed by this reduction only.
        bool alone = true;
        for (auto* n : pro.nodes) {
          const std::string& v = n->outputs[0];
          if (std::count(outputs_.begin(), outputs_.end(), v)) alone = false;
          for (int c : consumers_[v])
            if (c != static_cast<int>(i)) alone = false;
          if (v != in && !consumers_[v].empty()) alone = false;
        }
        if (!alone) continue;
        st.prologue = it->second;
        pro.fused_away = true;
      }
    }
    // A chain right after a row reduction that reads the reduced value broadcast over
    // the reduction's own input shape (x / norm, x * rsqrt(mean + eps), x - lse) is
    // computed in the reduction kernel's second pass over the row: the reduced value
    // never goes through memory, and one launch is saved.
    for (size_t i = 0; i + 1 < stages_.size(); ++i) {
      stage& st = stages_[i];
      stage& epi = stages_[i + 1];
      if (st.kind != stage::reduce || epi.kind != stage::elementwise || epi.fused_away) continue;
      auto spec = read_reduction(*st.nodes[0], base_kind(st.nodes[0]->kind));
      if (!spec) continue;
      const shaped& in = shapes_.at(spec->input);
      const int64_t rank = static_cast<int64_t>(in.shape.size());
      // Normalisations: any chain over their output (layer_norm then gelu). Reductions:
      // rows only, read back through keepdim.
      if (!spec->normalizes() && (spec->last != rank || spec->first == 0 || !spec->keepdim)) continue;
      if (epi.iter.shape != in.shape) continue;
      const std::string& v = spec->output;
      if (std::count(outputs_.begin(), outputs_.end(), v)) continue;
      bool only = true;
      for (int c : consumers_[v]) only = only && c == static_cast<int>(i + 1);
      if (!only) continue;
      st.epilogue = static_cast<int>(i + 1);
      epi.is_epilogue = true;
    }
    // A chain over a pool's or a scan's result, at that result's shape, runs in the
    // same kernel before the store: the pooled or scanned value stays in a register.
    for (size_t i = 0; i + 1 < stages_.size(); ++i) {
      stage& st = stages_[i];
      stage& epi = stages_[i + 1];
      if ((st.kind != stage::pool && st.kind != stage::scan) || epi.kind != stage::elementwise || epi.fused_away ||
          epi.is_epilogue)
        continue;
      const std::string& v = st.nodes[0]->outputs[0];
      if (epi.iter.shape != shapes_.at(v).shape) continue;
      if (std::count(outputs_.begin(), outputs_.end(), v)) continue;
      bool only = !consumers_[v].empty();
      for (int c : consumers_[v]) only = only && c == static_cast<int>(i + 1);
      if (!only) continue;
      st.epilogue = static_cast<int>(i + 1);
      epi.is_epilogue = true;
    }
    return {};
  }

  // Why no template takes `n` ("" when one does). Sets the shapes of its results when
  // one does.
  std::string template_refusal(const graph_node& n, const std::string& kind) {
    for (auto& i : n.inputs)
      if (is_tensor(i) && val(i).dtype != "float32")
        return "its input " + i + " is " + val(i).dtype + "; the templates read float32 only";
    if (auto s = shape_of_node(n, kind); !s) return s.message();
    auto flag = [&](size_t k) {
      return k < n.inputs.size() && !val(n.inputs[k]).numbers.empty() && val(n.inputs[k]).numbers[0] != 0;
    };
    if (kind == "aten::logit" && n.inputs.size() > 1 && !val(n.inputs[1]).is_none())
      return "aten::logit with eps is not supported by the rules coder";
    if ((kind == "aten::dropout" || kind == "aten::feature_dropout" || kind == "aten::alpha_dropout") && flag(2))
      return n.kind + " in training mode is not supported by the rules coder";
    // An operand computed at run time would be baked in at the export size; sizes
    // (x * x.size(1)) are kernel arguments. (The other templates read only constants
    // and ranks from their non-tensor inputs: layer_norm, the length of
    // normalized_shape; a reduction, dims, which x.dim() - 1 gives at every size.)
    if (elementwise_ops().count(kind))
      for (size_t k = 1; k < n.inputs.size(); ++k) {
        const graph_value& v = val(n.inputs[k]);
        if (v.is_scalar() && !v.constant && !scalar_sym_.count(n.inputs[k]))
          return "its operand " + n.inputs[k] + " is a scalar computed at run time";
      }
    return {};
  }

  // The shapes of a fallback op's results, as expressions: the graph gives sizes at one
  // size only, so each dim is matched to an input dim of the same size (the same
  // position first), else kept as the number (a constant such as topk's k). A wrong
  // match cannot pass silently: the result lands in a declared buffer, whose shape the
  // reviewer checks against what the op returned.
  status fallback_shapes(const graph_node& n, const std::string& why) {
    const std::string cannot = n.kind + " (value " + (n.outputs.empty() ? std::string("?") : n.outputs[0]) + "): " + why;
    if (n.schema.empty() || n.kind.rfind("aten::", 0) != 0)
      return error{cannot + "; and it has no ATen schema, so it cannot run as a library step either"};
    auto sch = parse_op_schema(n.schema);
    if (!sch) return error{cannot + "; " + sch.message()};
    if (sch->args.size() != n.inputs.size())
      return error{cannot + "; its node has " + std::to_string(n.inputs.size()) + " inputs for the " +
                   std::to_string(sch->args.size()) + " arguments of " + n.schema};
    std::vector<const shaped*> ins;
    for (auto& i : n.inputs)
      if (auto it = shapes_.find(i); it != shapes_.end()) ins.push_back(&it->second);
    for (auto& o : n.outputs) {
      const graph_value& ov = val(o);
      if (!ov.is_tensor()) {
        for (const graph_node& m : g_.nodes)
          if (!is_meta(base_kind(m.kind)) && std::count(m.inputs.begin(), m.inputs.end(), o))
            return error{cannot + "; its result " + o + " is a " + ov.type + ", which a library step cannot return"};
        continue;
      }
      shaped s{ov.shape, {}};
      for (size_t d = 0; d < ov.shape.size(); ++d) {
        const int64_t size = ov.shape[d];
        std::string sym;
        if (size == 1) sym = "1";
        for (const shaped* in : ins)
          if (sym.empty() && in->shape.size() == ov.shape.size() && in->shape[d] == size) sym = in->sym[d];
        for (const shaped* in : ins)
          for (size_t k = 0; sym.empty() && k < in->shape.size(); ++k)
            if (in->shape[k] == size) sym = in->sym[k];
        s.sym.push_back(sym.empty() ? std::to_string(size) : sym);
      }
      shapes_[o] = s;
    }
    return {};
  }

  bool used_outside(const std::string& v, const graph_node* next, const stage& cur) const {
    if (std::count(outputs_.begin(), outputs_.end(), v)) return true;
    bool seen_next = false;
    for (const graph_node& n : g_.nodes) {
      if (&n == next) {
        seen_next = true;
        continue;
      }
      bool in_cur = std::find(cur.nodes.begin(), cur.nodes.end(), &n) != cur.nodes.end();
      if (in_cur) continue;
      if (is_meta(base_kind(n.kind)) && base_kind(n.kind) != "prim::ListConstruct") continue;
      if (std::count(n.inputs.begin(), n.inputs.end(), v)) return true;
    }
    (void)seen_next;
    return false;
  }

  // Values computed by one stage and read by another (or returned) become tensors of
  // the plan: outputs when returned, scratch otherwise; a library step's result that
  // is not returned is an intermediate that the validator sizes.
  void plan_buffers() {
    for (size_t k = 0; k < outputs_.size(); ++k) {
      const std::string& v = outputs_[k];
      if (tensor_of_.count(v)) continue;  // an input returned as is: reported later
      std::string name = outputs_.size() == 1 ? "out" : "out" + std::to_string(k);
      tensor_of_[v] = name;
      // Kernels write float32; a fallback op may return another dtype (indices).
      out_.plan.outputs.push_back({name, shapes_.at(v).sym, val(v).dtype, "none"});
    }
    for (size_t i = 0; i < stages_.size(); ++i) {
      stage& st = stages_[i];
      if (st.fused_away) continue;
      if (!st.fallback.empty()) {
        // Declared, so that later kernels' sizes are expressions the reviewer checks
        // against what the op returns.
        for (auto& v : st.nodes[0]->outputs) {
          if (tensor_of_.count(v) || consumers_[v].empty() || !val(v).is_tensor()) continue;
          std::string name = "t_" + ident(v).substr(1);
          tensor_of_[v] = name;
          out_.plan.scratch.push_back({name, shapes_.at(v).sym, val(v).dtype, "none"});
        }
        continue;
      }
      for (auto* n : st.nodes) {
        const std::string& v = n->outputs[0];
        if (tensor_of_.count(v) || consumers_[v].empty()) continue;
        if (st.epilogue >= 0 && v == n->outputs[0] &&
            (st.kind == stage::reduce || st.kind == stage::pool || st.kind == stage::scan))
          continue;  // stays in registers
        std::string name = "t_" + ident(v).substr(1);
        tensor_of_[v] = name;
        if (st.kind != stage::library) out_.plan.scratch.push_back({name, shapes_.at(v).sym, "float32", "none"});
      }
    }
  }

  // -------------------------------------------------------------------------------
  // Elementwise code.

  // The runs [a, b) of dims of `iter` along which tensor shape `in` (aligned to the
  // right, as broadcasting does) is not broadcast.
  static std::vector<std::pair<size_t, size_t>> kept_groups(const shaped& in, const shaped& iter) {
    const size_t r = iter.shape.size();
    const int64_t off = static_cast<int64_t>(r) - static_cast<int64_t>(in.shape.size());
    auto kept = [&](size_t d) {
      int64_t k = static_cast<int64_t>(d) - off;
      return k >= 0 && in.shape[k] == iter.shape[d] && iter.shape[d] != 1;
    };
    std::vector<std::pair<size_t, size_t>> out;
    for (size_t d = 0; d < r;) {
      if (!kept(d)) {
        ++d;
        continue;
      }
      size_t a = d;
      while (d < r && kept(d)) ++d;
      out.push_back({a, d});
    }
    return out;
  }

  // A broadcast operand indexed by the flat element index costs a 64-bit division
  // (and a modulo) per element, which an elementwise kernel at memory speed cannot
  // afford. When the iteration splits into rows x c (dims [0, s) and [s, r)) such that
  // every broadcast operand is indexed by `row` alone, or by `c` with neither division
  // nor modulo (a bias along the last dims), the kernel walks rows and columns and
  // pays a division per row instead. Returns s, or 0 when no split does that or the
  // rows would be too short (under 1024 elements at the target size).
  size_t choose_split(const stage& st) {
    const shaped& iter = st.iter;
    const size_t r = iter.shape.size();
    std::set<std::string> inside;
    for (auto* n : st.nodes) inside.insert(n->outputs.begin(), n->outputs.end());
    std::vector<const shaped*> operands;
    for (auto* n : st.nodes)
      for (auto& id : n->inputs)
        if (!inside.count(id) && val(id).is_tensor() && shapes_.count(id) && shapes_.at(id).shape != iter.shape)
          operands.push_back(&shapes_.at(id));
    if (operands.empty() || r < 2) return 0;
    for (size_t sp = 1; sp < r; ++sp) {
      bool ok = true;
      for (const shaped* o : operands) {
        for (auto [a, b] : kept_groups(*o, iter)) {
          if (a < sp && sp < b) ok = false;  // straddles the split
          if (a >= sp) {                     // indexed by c: no division, no modulo
            for (size_t q = b; q < r; ++q) ok = ok && iter.shape[q] == 1;
            for (size_t q = sp; q < a; ++q) ok = ok && iter.shape[q] == 1;
          }
        }
      }
      if (!ok) continue;
      int64_t graph_inner = 1;
      for (size_t q = sp; q < r; ++q) graph_inner *= iter.shape[q];
      const std::vector<std::string> inner(iter.sym.begin() + sp, iter.sym.end());
      if (target_size(inner, graph_inner) < 1024) return 0;
      return sp;
    }
    return 0;
  }

  // The element index of tensor `id` (shape `in`) for flat index `i` of `iter`.
  std::string access(const shaped& in, const shaped& iter, const std::string& i, kernel_params& kp) {
    if (in.shape == iter.shape) return i;
    int64_t numel = 1;
    for (auto d : in.shape) numel *= d;
    if (numel == 1 && iter.shape.size() >= in.shape.size()) {
      bool all_one = true;
      for (auto d : in.shape) all_one &= d == 1;
      if (all_one) return "0";
    }
    const size_t r = iter.shape.size();
    const int64_t off = static_cast<int64_t>(r) - static_cast<int64_t>(in.shape.size());
    std::vector<std::string> terms;
    for (auto [a, b] : kept_groups(in, iter)) {
      // Split mode (an elementwise kernel over rows x c, see choose_split): a group
      // left of the split is indexed from `row`, one right of it from `c`.
      const bool split = split_ > 0 && i == "i";
      const bool in_row = split && b <= split_;
      const size_t lo = split && !in_row ? split_ : 0, hi = in_row ? split_ : r;
      std::vector<std::string> inner(iter.sym.begin() + b, iter.sym.begin() + hi);
      std::vector<std::string> span(iter.sym.begin() + a, iter.sym.begin() + b);
      std::vector<std::string> stride;
      for (size_t q = b; q < r; ++q) {
        int64_t k = static_cast<int64_t>(q) - off;
        if (k >= 0) stride.push_back(in.sym[k]);
      }
      std::string e = !split ? i : in_row ? "row" : "c";
      bool has_inner = false;
      for (size_t q = b; q < hi; ++q) has_inner |= iter.shape[q] != 1;
      if (has_inner) e = "(" + e + " / " + kp.int64(product(inner)) + ")";
      bool has_outer = false;
      for (size_t q = lo; q < a; ++q) has_outer |= iter.shape[q] != 1;
      if (has_outer) e = "(" + e + " % " + kp.int64(product(span)) + ")";
      std::string st = product(stride);
      if (st != "1") e += " * " + kp.int64(st);
      terms.push_back(e);
    }
    return terms.empty() ? "0" : join(terms, " + ");
  }

  // The chain's statements for element index `i`; `load` reads an external tensor.
  // Returns the variable of each value computed.
  status chain_code(const stage& st, const std::string& i, kernel_params& kp, std::string& code,
                    std::map<std::string, std::string>& var, const std::string& tag) {
    auto operand = [&](const std::string& id) -> result<std::string> {
      if (auto it = var.find(id); it != var.end()) return it->second;
      const graph_value& v = val(id);
      if (v.is_tensor()) {
        auto t = tensor_of_.find(id);
        if (t == tensor_of_.end()) return error{"value " + id + " is read before it is computed"};
        if (v.dtype != "float32") return error{"value " + id + " is " + v.dtype + "; float32 only"};
        std::string p = kp.tensor_in(t->second);
        std::string name = "x" + tag + std::to_string(var.size());
        const std::string idx = access(shapes_.at(id), st.iter, i, kp);
        std::string ld = p + "[" + idx + "]";
        if (load_hint_ == "streaming" && idx == i) ld = "__ldcs(" + p + " + " + i + ")";
        else if (load_hint_ == "readonly" || (load_hint_ == "readonly_broadcast" && idx != i))
          ld = "__ldg(" + p + " + (" + idx + "))";
        code += "    const float " + name + " = " + ld + ";\n";
        var[id] = name;
        return name;
      }
      if (auto s = scalar_sym_.find(id); s != scalar_sym_.end()) {
        std::string p = kp.float32(s->second);
        var[id] = p;
        return p;
      }
      if (v.is_scalar()) return flit(v.numbers.at(0));
      return error{"value " + id + " (" + v.type + ") cannot be an operand"};
    };
    for (const graph_node* n : st.nodes) {
      std::string kind = base_kind(n->kind);
      std::vector<std::string> a;
      auto num = [&](size_t k, double dflt) {
        if (k >= n->inputs.size()) return dflt;
        const graph_value& v = val(n->inputs[k]);
        return v.numbers.empty() ? dflt : v.numbers[0];
      };
      auto none = [&](size_t k) { return k >= n->inputs.size() || val(n->inputs[k]).is_none(); };
      auto opnd = [&](size_t k) -> result<std::string> { return operand(n->inputs.at(k)); };
      auto x = opnd(0);
      if (!x) return error{n->kind + ": " + x.message()};
      const std::string X = *x;
      std::string e;
      auto second = [&]() -> result<std::string> { return opnd(1); };
      if (kind == "aten::relu") e = "fmaxf(" + X + ", 0.0f)";
      else if (kind == "aten::sigmoid") e = "KS_DIV(1.0f, 1.0f + KS_EXP(-" + X + "))";
      else if (kind == "aten::tanh") e = "tanhf(" + X + ")";
      else if (kind == "aten::exp") e = "KS_EXP(" + X + ")";
      else if (kind == "aten::log") e = "logf(" + X + ")";
      else if (kind == "aten::neg") e = "-" + X;
      else if (kind == "aten::abs") e = "fabsf(" + X + ")";
      else if (kind == "aten::sqrt") e = "sqrtf(" + X + ")";
      else if (kind == "aten::rsqrt") e = "rsqrtf(" + X + ")";
      else if (kind == "aten::silu") e = "KS_DIV(" + X + ", 1.0f + KS_EXP(-" + X + "))";
      else if (kind == "aten::sin") e = "sinf(" + X + ")";
      else if (kind == "aten::cos") e = "cosf(" + X + ")";
      else if (kind == "aten::tan") e = "tanf(" + X + ")";
      else if (kind == "aten::atan") e = "atanf(" + X + ")";
      else if (kind == "aten::sinh") e = "sinhf(" + X + ")";
      else if (kind == "aten::cosh") e = "coshf(" + X + ")";
      else if (kind == "aten::erf") e = "erff(" + X + ")";
      else if (kind == "aten::erfc") e = "erfcf(" + X + ")";
      else if (kind == "aten::log1p") e = "log1pf(" + X + ")";
      else if (kind == "aten::expm1") e = "expm1f(" + X + ")";
      else if (kind == "aten::exp2") e = "exp2f(" + X + ")";
      else if (kind == "aten::log2") e = "log2f(" + X + ")";
      else if (kind == "aten::log10") e = "log10f(" + X + ")";
      else if (kind == "aten::reciprocal") e = "1.0f / " + X;
      else if (kind == "aten::square") e = X + " * " + X;
      else if (kind == "aten::floor") e = "floorf(" + X + ")";
      else if (kind == "aten::ceil") e = "ceilf(" + X + ")";
      else if (kind == "aten::trunc") e = "truncf(" + X + ")";
      else if (kind == "aten::sign") e = "(float)((" + X + " > 0.0f) - (" + X + " < 0.0f))";
      // Times 1/6 rather than an IEEE division (a subroutine with a slow path): within
      // an ulp of ATen's x / 6, and the kernel stays at memory speed.
      else if (kind == "aten::hardsigmoid") e = "fminf(fmaxf(" + X + " * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f)";
      else if (kind == "aten::hardswish") e = X + " * fminf(fmaxf(" + X + " + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f)";
      else if (kind == "aten::relu6") e = "fminf(fmaxf(" + X + ", 0.0f), 6.0f)";
      else if (kind == "aten::mish")
        e = X + " * tanhf(" + X + " > 20.0f ? " + X + " : log1pf(expf(" + X + ")))";
      else if (kind == "aten::selu")
        e = "1.0507009873554805f * (" + X + " > 0.0f ? " + X + " : 1.6732632423543772f * expm1f(" + X + "))";
      else if (kind == "aten::log_sigmoid") e = "fminf(" + X + ", 0.0f) - log1pf(expf(-fabsf(" + X + ")))";
      else if (kind == "aten::softsign") e = X + " / (1.0f + fabsf(" + X + "))";
      else if (kind == "aten::logit") {
        if (!none(1)) return error{"aten::logit with eps is not supported by the rules coder"};
        e = "logf(" + X + " / (1.0f - " + X + "))";
      } else if (kind == "aten::gelu") {
        const graph_value* ap = n->inputs.size() > 1 ? &val(n->inputs[1]) : nullptr;
        if (ap && ap->text == "tanh")
          e = "0.5f * " + X + " * (1.0f + tanhf(0.7978845608028654f * (" + X + " + 0.044715f * " + X + " * " + X + " * " + X + ")))";
        else
          e = "0.5f * " + X + " * (1.0f + erff(" + X + " * 0.7071067811865476f))";
      } else if (kind == "aten::leaky_relu") {
        e = X + " > 0.0f ? " + X + " : " + X + " * " + flit(num(1, 0.01));
      } else if (kind == "aten::hardtanh") {
        e = "fminf(fmaxf(" + X + ", " + flit(num(1, -1)) + "), " + flit(num(2, 1)) + ")";
      } else if (kind == "aten::clamp" || kind == "aten::clip") {
        e = X;
        for (int k : {1, 2}) {
          if (none(k)) continue;
          auto b = opnd(k);
          if (!b) return error{n->kind + ": " + b.message()};
          e = std::string(k == 1 ? "fmaxf(" : "fminf(") + e + ", " + *b + ")";
        }
      } else if (kind == "aten::clamp_min" || kind == "aten::clamp_max") {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        e = std::string(kind == "aten::clamp_min" ? "fmaxf(" : "fminf(") + X + ", " + *b + ")";
      } else if (kind == "aten::elu") {
        std::string al = flit(num(1, 1)), sc = flit(num(2, 1)), is = flit(num(3, 1));
        e = X + " > 0.0f ? " + sc + " * " + X + " : " + sc + " * " + al + " * expm1f(" + X + " * " + is + ")";
      } else if (kind == "aten::celu") {
        std::string al = flit(num(1, 1));
        e = "fmaxf(" + X + ", 0.0f) + fminf(0.0f, " + al + " * expm1f(" + X + " / " + al + "))";
      } else if (kind == "aten::softplus") {
        std::string be = flit(num(1, 1)), th = flit(num(2, 20));
        e = X + " * " + be + " > " + th + " ? " + X + " : log1pf(expf(" + X + " * " + be + ")) / " + be;
      } else if (kind == "aten::threshold") {
        e = X + " > " + flit(num(1, 0)) + " ? " + X + " : " + flit(num(2, 0));
      } else if (kind == "aten::hardshrink") {
        std::string l = flit(num(1, 0.5));
        e = "fabsf(" + X + ") > " + l + " ? " + X + " : 0.0f";
      } else if (kind == "aten::softshrink") {
        std::string l = flit(num(1, 0.5));
        e = X + " > " + l + " ? " + X + " - " + l + " : (" + X + " < -" + l + " ? " + X + " + " + l + " : 0.0f)";
      } else if (kind == "aten::pow") {
        const graph_value& ev = val(n->inputs[1]);
        if (!val(n->inputs[0]).is_tensor()) {
          auto b = second();
          if (!b) return error{n->kind + ": " + b.message()};
          e = "powf(" + X + ", " + *b + ")";
        } else if (ev.is_scalar() && !scalar_sym_.count(n->inputs[1])) {
          double p = ev.numbers.at(0);
          if (p == 2) e = X + " * " + X;
          else if (p == 3) e = X + " * " + X + " * " + X;
          else if (p == 1) e = X;
          else if (p == 0.5) e = "sqrtf(" + X + ")";
          else if (p == -1) e = "1.0f / " + X;
          else e = "powf(" + X + ", " + flit(p) + ")";
        } else {
          auto b = second();
          if (!b) return error{n->kind + ": " + b.message()};
          e = "powf(" + X + ", " + *b + ")";
        }
      } else if (kind == "aten::dropout" || kind == "aten::feature_dropout" || kind == "aten::alpha_dropout") {
        if (num(2, 0) != 0) return error{n->kind + " in training mode is not supported by the rules coder"};
        e = X;
      } else if (kind == "aten::contiguous" || kind == "aten::clone" || kind == "aten::detach" ||
                 kind == "aten::to" || kind == "aten::type_as" || kind == "aten::expand_as" ||
                 kind == "aten::expand") {
        e = X;
      } else if (kind == "aten::add" || kind == "aten::sub" || kind == "aten::subtract" || kind == "aten::rsub") {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        double alpha = num(2, 1);
        std::string B = alpha == 1 ? *b : flit(alpha) + " * " + *b;
        if (kind == "aten::add") e = X + " + " + B;
        else if (kind == "aten::rsub") e = *b + " - " + (alpha == 1 ? X : flit(alpha) + " * " + X);
        else e = X + " - " + B;
      } else if (kind == "aten::mul" || kind == "aten::multiply") {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        e = X + " * " + *b;
      } else if (kind == "aten::div" || kind == "aten::divide" || kind == "aten::true_divide") {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        const graph_value* mode = n->inputs.size() > 2 ? &val(n->inputs[2]) : nullptr;
        // Division stays IEEE: KS_DIV (__fdividef) is wrong for huge divisors.
        e = X + " / " + *b;
        if (mode && mode->text == "floor") e = "floorf(" + e + ")";
        else if (mode && mode->text == "trunc") e = "truncf(" + e + ")";
      } else if (kind == "aten::maximum" || kind == "aten::minimum" || kind == "aten::atan2") {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        e = (kind == "aten::maximum" ? "fmaxf(" : kind == "aten::minimum" ? "fminf(" : "atan2f(") + X + ", " + *b + ")";
      } else {
        return error{"op " + n->kind + " (value " + n->outputs[0] + ") is not supported by the rules coder"};
      }
      std::string name = "e" + tag + std::to_string(var.size());
      code += "    const float " + name + " = " + e + ";\n";
      var[n->outputs[0]] = name;
    }
    return {};
  }

  // The fused epilogue of stage `si` (a pool or a scan): its chain with `value` (the
  // stage's result) in the register `res`, at element index `idx`, then the stores of
  // what the plan needs of it. Empty when the stage has none.
  struct epilogue_code {
    std::string code;  // statements reading `res` and the index variable
    std::string stores;
  };
  result<epilogue_code> fused_epilogue(size_t si, const std::string& value, const std::string& idx,
                                       kernel_params& kp) {
    epilogue_code out;
    if (stages_[si].epilogue < 0) return out;
    stage& epi = stages_[stages_[si].epilogue];
    std::map<std::string, std::string> var{{value, "res"}};
    if (auto s = chain_code(epi, idx, kp, out.code, var, "p"); !s) return error{s.message()};
    for (auto* en : epi.nodes) {
      auto it = tensor_of_.find(en->outputs[0]);
      if (it == tensor_of_.end()) continue;
      out.stores += "    " + kp.tensor_out(it->second) + "[" + idx + "] = " + var.at(en->outputs[0]) + ";\n";
      written_.insert(en->outputs[0]);
    }
    return out;
  }

  status emit_elementwise(size_t si) {
    stage& st = stages_[si];
    kernel_params kp;
    // Which values of the chain the plan needs.
    std::vector<std::pair<std::string, std::string>> exports;  // value → tensor
    for (auto* n : st.nodes) {
      auto it = tensor_of_.find(n->outputs[0]);
      if (it == tensor_of_.end()) continue;
      if (shapes_.at(n->outputs[0]).shape != st.iter.shape)
        return error{"elementwise chain: value " + n->outputs[0] + " is needed at a smaller shape than the chain's"};
      exports.push_back({n->outputs[0], it->second});
    }
    const int V = p_.vector_width, U = p_.elements_per_thread, B = p_.block_size;
    // Inputs of the iteration shape are loaded as vectors; the others element by element.
    std::string n_expr = product(st.iter.sym);
    std::string N = kp.int64(n_expr);
    std::map<std::string, std::string> var;
    std::string body, tail_body;
    // cache_hint: streaming marks full-shape operands and the plan's outputs as
    // touch-once (__ldcs/__stcs, evict first), never scratch that a later kernel reads
    // back; readonly reads every operand through the read-only path (__ldg).
    const std::string hint = p_.cache_hint;
    const size_t split = V > 1 ? choose_split(st) : 0;
    std::string ROWS, INNER;
    if (split) {
      ROWS = kp.int64(product(std::vector<std::string>(st.iter.sym.begin(), st.iter.sym.begin() + split)));
      INNER = kp.int64(product(std::vector<std::string>(st.iter.sym.begin() + split, st.iter.sym.end())));
    }
    split_ = split;
    load_hint_ = V == 1 ? hint : hint == "readonly" ? "readonly_broadcast" : "none";
    status body_ok = chain_code(st, "i", kp, body, var, "");
    std::map<std::string, std::string> var2;
    load_hint_ = hint;  // the tail reuses the same parameters
    status tail_ok = body_ok ? chain_code(st, "i", kp, tail_body, var2, "t") : body_ok;
    load_hint_ = "none";
    split_ = 0;
    if (!tail_ok) return tail_ok;
    std::set<std::string> streamed_out;  // output parameters stored with __stcs
    std::vector<std::string> outs;
    for (auto& [v, t] : exports) {
      outs.push_back(kp.tensor_out(t));
      bool plan_output = false;
      for (auto& b : out_.plan.outputs) plan_output = plan_output || b.name == t;
      if (hint == "streaming" && plan_output) streamed_out.insert(outs.back());
    }
    std::string name = kernel_name(si, "elementwise");
    std::ostringstream k;
    k << "\n// Fused elementwise chain:";
    for (auto* n : st.nodes) k << " " << base_kind(n->kind).substr(6);
    k << ". " << V << " floats per vector, " << U << " vector(s) per thread per trip, grid-stride"
      << (split ? "; rows x columns (blockIdx.y walks the rows), so broadcast operands are indexed by row or column without a division per element" : "")
      << (hint == "streaming" ? "; streamed operands and outputs evict first (__ldcs/__stcs)"
          : hint == "readonly" ? "; operands through the read-only path (__ldg)" : "")
      << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
    k << "  const long long stride = (long long)gridDim.x * blockDim.x;\n";
    k << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
    auto store_line = [&](const std::map<std::string, std::string>& vars, const std::string& idx) {
      std::string s;
      for (size_t o = 0; o < exports.size(); ++o)
        s += streamed_out.count(outs[o]) ? "    __stcs(" + outs[o] + " + " + idx + ", " + vars.at(exports[o].first) + ");\n"
                                         : "    " + outs[o] + "[" + idx + "] = " + vars.at(exports[o].first) + ";\n";
      return s;
    };
    if (V == 1) {
      k << "  for (long long j = tid; j < " << N << "; j += stride * " << U << ") {\n";
      k << "#pragma unroll\n  for (int u = 0; u < " << U << "; ++u) {\n";
      k << "    const long long i = j + u * stride;\n    if (i >= " << N << ") break;\n";
      k << body << store_line(var, "i") << "  }\n  }\n";
    } else {
      // Vector path: every element of a vector goes through the same chain; full-shape
      // operands are read as float2/float4 (buffers are 256-byte aligned), the rest by
      // index. The tail (n % V elements) is done one by one.
      std::string vt = V == 4 ? "float4" : "float2";
      // The vector index of trip u: `w` (and `cv`, the vector in the row, when split).
      std::string trip_index;
      if (split) {
        // Rows x columns: a row's vectors are aligned when its length is a multiple
        // of V; other lengths take the element-by-element loop below.
        k << "  for (long long row = blockIdx.y; row < " << ROWS << "; row += gridDim.y) {\n";
        k << "  const long long base = row * " << INNER << ";\n";
        k << "  if (" << INNER << " % " << V << " == 0) {\n";
        k << "  const long long nv = " << INNER << " / " << V << ", bv = base / " << V << ";\n";
        trip_index = "    const long long cv = j + u * stride, w = bv + cv;\n    if (cv >= nv) break;\n";
      } else {
        k << "  const long long nv = " << N << " / " << V << ";\n";
        trip_index = "    const long long w = j + u * stride;\n    if (w >= nv) break;\n";
      }
      k << "  for (long long j = tid; j < nv; j += stride * " << U << ") {\n";
      std::vector<std::string> lanes = V == 4 ? std::vector<std::string>{"x", "y", "z", "w"} : std::vector<std::string>{"x", "y"};
      // The full-shape operands' vectors of every trip are loaded first, then computed
      // and stored: U loads in flight per thread and operand, not one.
      std::map<std::string, std::string> full_vec;  // param → vector variable
      for (auto& [tensor, param] : kp.tensor_param) {
        if (param.rfind("in", 0) != 0) continue;
        bool full = body.find(param + "[i]") != std::string::npos;
        if (!full) continue;
        full_vec[param] = "q_" + param + "[u]";
        k << "  " << vt << " q_" << param << "[" << U << "];\n";
      }
      if (!full_vec.empty()) {
        k << "#pragma unroll\n  for (int u = 0; u < " << U << "; ++u) {\n" << trip_index;
        for (auto& [param, vv] : full_vec) {
          const std::string at = "reinterpret_cast<const " + vt + "*>(" + param + ")";
          k << "    " << vv << " = "
            << (hint == "streaming" ? "__ldcs(" + at + " + w)" : hint == "readonly" ? "__ldg(" + at + " + w)" : at + "[w]") << ";\n";
        }
        k << "  }\n";
      }
      k << "#pragma unroll\n  for (int u = 0; u < " << U << "; ++u) {\n" << trip_index;
      for (auto& o : outs) k << "    " << vt << " r_" << o << ";\n";
      for (int l = 0; l < V; ++l) {
        std::string b = body;
        for (auto& [param, vv] : full_vec) {
          std::string from = param + "[i]", to = vv + "." + lanes[l];
          for (size_t pos = b.find(from); pos != std::string::npos; pos = b.find(from, pos + to.size())) b.replace(pos, from.size(), to);
        }
        if (split)
          k << "    {\n    const long long c = cv * " << V << " + " << l << ", i = base + c;\n    (void)c; (void)i;\n" << b;
        else
          k << "    {\n    const long long i = w * " << V << " + " << l << ";\n    (void)i;\n" << b;
        for (size_t o = 0; o < exports.size(); ++o) k << "    r_" << outs[o] << "." << lanes[l] << " = " << var.at(exports[o].first) << ";\n";
        k << "    }\n";
      }
      for (auto& o : outs)
        if (streamed_out.count(o)) k << "    __stcs(reinterpret_cast<" << vt << "*>(" << o << ") + w, r_" << o << ");\n";
        else k << "    reinterpret_cast<" << vt << "*>(" << o << ")[w] = r_" << o << ";\n";
      k << "  }\n  }\n";
      if (split) {
        k << "  } else {\n";
        k << "  for (long long c = tid; c < " << INNER << "; c += stride) {\n    const long long i = base + c;\n"
          << tail_body << store_line(var2, "i") << "  }\n  }\n  }\n";
      } else {
        k << "  for (long long i = nv * " << V << " + tid; i < " << N << "; i += stride) {\n"
          << tail_body << store_line(var2, "i") << "  }\n";
      }
    }
    k << "}\n";
    src_ += k.str();
    plan_step step;
    step.kind = "kernel";
    step.name = name;
    if (split) {
      const std::string rows = product(std::vector<std::string>(st.iter.sym.begin(), st.iter.sym.begin() + split));
      const std::string inner = product(std::vector<std::string>(st.iter.sym.begin() + split, st.iter.sym.end()));
      // Blocks across a row so that each thread has about 4 trips in it (the row's
      // own indices are computed once per trip), and rows (grid.y ≤ 65535) until the
      // grid holds about grid_cap blocks; each block walks rows gridDim.y apart.
      const std::string bx = "max(1, min(ceil_div(" + paren(inner) + ", " + std::to_string(V * B * U * 4) + "), " + std::to_string(p_.grid_cap) + "))";
      step.grid = {bx, "max(1, min(" + paren(rows) + ", min(65535, ceil_div(" + std::to_string(p_.grid_cap) + ", " + bx + "))))", "1"};
    } else {
      std::string blocks = "max(1, min(ceil_div(" + paren(n_expr) + ", " + std::to_string(V * B * U) + "), " + std::to_string(p_.grid_cap) + "))";
      step.grid = {blocks, "1", "1"};
    }
    step.block = {std::to_string(B), "1", "1"};
    step.args = kp.args;
    out_.plan.steps.push_back(step);
    for (auto& [v, t] : exports) written_.insert(v);
    return {};
  }

  // -------------------------------------------------------------------------------
  // Reductions.

  status emit_reduce(size_t si) {
    stage& st = stages_[si];
    const graph_node& n = *st.nodes[0];
    auto spec = read_reduction(n, base_kind(n.kind));
    if (!spec) return error{spec.message()};
    const reduction_spec& r = *spec;
    const shaped& in = shapes_.at(r.input);
    kernel_params kp;
    std::vector<std::string> outer(in.sym.begin(), in.sym.begin() + r.first),
        red(in.sym.begin() + r.first, in.sym.begin() + r.last), inner(in.sym.begin() + r.last, in.sym.end());
    int64_t inner_n = 1, outer_n = 1;
    for (int64_t d = r.last; d < static_cast<int64_t>(in.shape.size()); ++d) inner_n *= in.shape[d];
    for (int64_t d = 0; d < r.first; ++d) outer_n *= in.shape[d];
    // The length of the reduced span at the task's own shapes (the graph's as fallback):
    // what the row cache and the seeds' row mapping are sized for.
    int64_t graph_len = 1;
    for (int64_t d = r.first; d < r.last; ++d) graph_len *= in.shape[d];
    const int64_t row_len = target_size(red, graph_len);
    const std::string ROWS = kp.int64(product(outer)), C = kp.int64(product(red));
    std::string INNER;
    if (inner_n != 1) INNER = kp.int64(product(inner));
    // How an element of the reduced input is read: straight, or through the fused chain.
    std::string load_code;
    std::map<std::string, std::string> var;
    stage* pro = st.prologue >= 0 ? &stages_[st.prologue] : nullptr;
    if (pro) {
      if (auto s = chain_code(*pro, "i", kp, load_code, var, ""); !s) return s;
    }
    std::string X;
    if (!pro) X = kp.tensor_in(tensor_of_.at(r.input));
    auto load = [&](const std::string& idx, const std::string& into) {
      if (!pro) return "    const float " + into + " = " + X + "[" + idx + "];\n";
      std::string c = load_code;
      return "    float " + into + ";\n    {\n    const long long i = " + idx + ";\n" + c + "    " + into + " = " + var.at(r.input) + ";\n    }\n";
    };
    std::string W, Bi;
    if (!r.weight.empty()) W = kp.tensor_in(tensor_of_.at(r.weight));
    if (!r.bias.empty()) Bi = kp.tensor_in(tensor_of_.at(r.bias));
    // The fused epilogue chain, evaluated per element of the row with the reduced
    // value in the register `red`.
    stage* epi = st.epilogue >= 0 ? &stages_[st.epilogue] : nullptr;
    std::string epi_code;
    std::vector<std::pair<std::string, std::string>> epi_out;  // value var → parameter
    std::map<std::string, std::string> epi_var;
    if (epi) {
      epi_var[r.output] = "red";
      if (auto s = chain_code(*epi, "i", kp, epi_code, epi_var, "p"); !s) return s;
      for (auto* en : epi->nodes) {
        auto it = tensor_of_.find(en->outputs[0]);
        if (it != tensor_of_.end()) epi_out.push_back({en->outputs[0], it->second});
      }
      for (auto& [v, t] : epi_out) t = kp.tensor_out(t);
    }
    const std::string OUT = epi ? std::string() : kp.tensor_out(tensor_of_.at(r.output));
    acc_text a = acc_of(r);
    const bool warp = p_.row_mapping == "warp" && inner_n == 1;
    // A row's elements for this thread: from `lane`, every `width` (a row's kernels).
    const std::string lane = warp ? "lane" : "(int)threadIdx.x", width = warp ? "32" : "(int)blockDim.x";
    int B = p_.block_size;
    std::string name = kernel_name(si, r.op);
    std::ostringstream k;
    std::string decl;
    for (size_t q = 0; q < a.state.size(); ++q) decl += "  float " + a.state[q] + " = " + a.identity[q] + ";\n";
    std::string y, prelude;
    if (r.op == "softmax") prelude = "  const float inv = 1.0f / s;\n", y = "KS_EXP(v - m) * inv";
    else if (r.op == "log_softmax") prelude = "  const float lse = m + logf(s);\n", y = "v - lse";
    else if (r.op == "layer_norm") {
      prelude = "  const float mean_d = s1 / (float)" + C + ";\n  const float mean = shift + mean_d;\n";
      prelude += "  const float var = fmaxf(s2 / (float)" + C + " - mean_d * mean_d, 0.0f);\n";
      prelude += "  const float rstd = rsqrtf(var + " + flit(r.eps) + ");\n";
      y = "(v - mean) * rstd";
      if (!W.empty()) y = "(" + y + ") * " + W + "[c]";
      if (!Bi.empty()) y += " + " + Bi + "[c]";
    }
    // The second pass's work for the element `v` at `idx`: the normalised value, stored
    // or handed to the fused epilogue chain.
    auto pass2_body = [&](const std::string& idx, const std::string& yv = "") {
      const std::string& yy = yv.empty() ? y : yv;
      if (!epi) return "    " + OUT + "[" + idx + "] = " + yy + ";\n";
      std::string t = "    const float red = " + yy + ";\n    const long long i = " + idx + ";\n" + epi_code;
      for (auto& [v, param] : epi_out) t += "    " + param + "[i] = " + epi_var.at(v) + ";\n";
      for (auto& [v, param] : epi_out) written_.insert(v);
      return t;
    };
    // Pass 2 of a row (inner_n == 1) from `loop` on, read from memory: the normalised
    // value or the epilogue, per element.
    auto pass2_from = [&](const std::string& loop) {
      if (r.normalizes()) return loop + " {\n" + load("base + c", "v") + pass2_body("base + c") + "  }\n";
      std::string t = loop + " {\n    const long long i = base + c;\n" + epi_code;
      for (auto& [v, param] : epi_out) t += "    " + param + "[i] = " + epi_var.at(v) + ";\n";
      for (auto& [v, param] : epi_out) written_.insert(v);
      return t + "  }\n";
    };
    auto second_pass = [&](const std::string& loop, const std::string& idx) {
      return prelude + loop + " {\n" + load(idx, "v") + pass2_body(idx) + "  }\n";
    };
    // row_cache: when the row is read a second time (a normalisation's second pass, or
    // an epilogue that reads the reduced tensor again, as in x * rsqrt(mean(x*x)) or
    // x - logsumexp(x)), the row stays on chip and pass 2 reads it there instead of
    // memory.
    // "registers": each thread keeps its part of the row in registers. A
    // normalisation keeps the value it reduces (`rv`, after the fused prologue); an
    // epilogue that reads a row tensor again keeps that tensor's raw values (`rc_P`).
    // K values per thread and array: enough for the whole row at the task's size, at
    // most 32 registers in all; at a larger size the row's rest is read again. Pass 1
    // issues all K loads before it computes anything (loads behind the online
    // softmax's branches would wait one by one), and the arrays are indexed only by
    // unrolled constants, so they stay in registers.
    // "shared" (a block per row): the row's tensors are copied into dynamic shared
    // memory (cp.async: every copy in flight at once, no registers held), at most
    // kSharedRow floats in all (64 KiB: three blocks an SM on an H200, so one row's
    // copies overlap another's math), walked as float4s where rows are 16-byte
    // aligned. A prologue's value replaces the raw element there when nothing reads
    // the raw row again; else pass 2 recomputes it. A longer row's rest is read twice.
    // With a warp per row it means "registers".
    // "on_chip": registers where the row fits them, else shared memory.
    const bool whole_tensor = inner_n == 1 && outer_n == 1 && !r.normalizes() && in.shape.size() > 0;
    std::vector<std::string> row_params;  // tensors pass 1 reads at [i]: loaded first
    std::vector<std::string> cached;      // those pass 2 reads again at [i] (the epilogue)
    bool keep_value = false;              // rv: the reduced value, for a normalisation's pass 2
    int K = 0;
    bool smem = false;  // the row staged in shared memory
    if (p_.row_cache != "none" && inner_n == 1 && !whole_tensor && (r.normalizes() || epi)) {
      const std::string pass1 = pro ? load_code : X + "[i]";
      for (auto& [tensor, param] : kp.tensor_param)
        if (param.rfind("in", 0) == 0 && reads_at(pass1, param, "i")) row_params.push_back(param);
      for (auto& P : row_params)
        if (reads_at(epi_code, P, "i")) cached.push_back(P);
      keep_value = r.normalizes();
      // Without a prologue the value is the raw element: one array serves both.
      const int64_t arrays = (keep_value && (pro || cached.empty()) ? 1 : 0) + static_cast<int64_t>(cached.size());
      if (arrays > 0 && arrays <= 2 && row_params.size() <= 2) {
        // Only rows that fit whole: measured on an H200, a row of 16384 kept by 512
        // threads (one block an SM, the loads of the next row not overlapping this
        // one's reduction) ran no faster than reading it twice through float4 loads.
        const int64_t kmax = 32 / arrays;
        const int64_t width = warp ? 32 : B;
        const int64_t need = (row_len + width - 1) / width;
        if ((p_.row_cache != "shared" || warp) && need <= kmax) K = static_cast<int>(std::max<int64_t>(need, 1));
        smem = K == 0 && !warp && !row_params.empty() && p_.row_cache != "registers";
      } else {
        row_params.clear();
        cached.clear();
        keep_value = false;
      }
    }
    const bool cache = K > 0;
    // Rows read as float4 when they are 16-byte aligned (C % 4 == 0; buffers are
    // aligned), the rest element by element.
    const bool vec_rows = p_.vector_width == 4 && !pro && !cache && !smem;
    // Pass 2 reads the cached values where it would read the tensors at [i].
    auto from_cache = [&](std::string code) {
      for (auto& P : row_params) code = replace_reads(code, P, "i", "rc_" + P + "[k]");
      return code;
    };
    const char* lanes4[] = {"x", "y", "z", "w"};
    // The staged part of a row is walked as float4s (q_P: this thread's four
    // elements of tensor P) where rows are 16-byte aligned, else element by element
    // (sh_P[c]); `io` says which, and which of the four.
    struct lane_io {
      bool vec;
      int l;
    };
    bool in_place = false, store_exp = false;  // what the staged part holds after pass 1
    // What pass 2 starts from: the normalisation's constants, or the reduced value for
    // an epilogue; with the softmax's stored exps, each thread's rescaling factor.
    auto pass2_head = [&] {
      std::string t = r.normalizes() ? prelude : "  const float red = " + finish(r, C) + ";\n";
      if (store_exp) t += "  const float kt = KS_EXP(mref - m) * inv;  // this thread's exps, rescaled to the row's\n";
      return t;
    };
    // `code` reading the staged tensors where it read them at [i].
    auto staged_reads = [&](std::string code, const lane_io& io) {
      for (auto& P : row_params)
        code = replace_reads(code, P, "i", io.vec ? "q_" + P + "." + lanes4[io.l] : "sh_" + P + "[c]");
      return code;
    };
    // The reduced value `v` of the element at c: the staged raw element through the
    // prologue, or (`stored`) what pass 1 wrote in its place.
    auto staged_value = [&](const lane_io& io, bool stored) {
      if (!pro || stored) return "      const float v = " + staged_reads(X.empty() ? row_params.front() + "[i]" : X + "[i]", io) + ";\n";
      return "      float v;\n      {\n      const long long i = base + c;\n      (void)i;\n" + staged_reads(load_code, io) +
             "      v = " + var.at(r.input) + ";\n      }\n";
    };
    auto write_back = [&](const std::string& P, const std::string& e, const lane_io& io) {
      return io.vec ? "      w_" + P + "." + lanes4[io.l] + " = " + e + ";\n" : "      sh_" + P + "[c] = " + e + ";\n";
    };
    auto store_out = [&](const std::string& param, const std::string& e, const lane_io& io) {
      return io.vec ? "      o_" + param + "." + lanes4[io.l] + " = " + e + ";\n"
                    : "      " + param + "[base + c] = " + e + ";\n";
    };
    // One loop over the staged part: `body` per element (c, and i = base + c, in
    // scope); `writes` are staged tensors the body writes back (write_back), `outs`
    // the outputs it stores (store_out).
    auto staged = [&](const std::function<std::string(const lane_io&)>& body, const std::vector<std::string>& writes,
                      const std::vector<std::string>& outs) {
      std::string t = "  if (v4) {\n    for (int c4 = " + lane + "; c4 < cc / 4; c4 += " + width + ") {\n";
      for (auto& P : row_params) t += "      const float4 q_" + P + " = reinterpret_cast<const float4*>(sh_" + P + ")[c4];\n";
      for (auto& P : writes) t += "      float4 w_" + P + ";\n";
      for (auto& o : outs) t += "      float4 o_" + o + ";\n";
      for (int l = 0; l < 4; ++l)
        t += "      {\n      const long long c = c4 * 4 + " + std::to_string(l) + ";\n      (void)c;\n" + body({true, l}) +
             "      }\n";
      for (auto& P : writes) t += "      reinterpret_cast<float4*>(sh_" + P + ")[c4] = w_" + P + ";\n";
      for (auto& o : outs) t += "      reinterpret_cast<float4*>(" + o + " + base)[c4] = o_" + o + ";\n";
      t += "    }\n  } else {\n    for (int c = " + lane + "; c < cc; c += " + width + ") {\n" + body({false, 0}) + "    }\n  }\n";
      return t;
    };
    k << "\n// " << r.op << " over " << (inner_n == 1 ? "the last dims" : "a middle dim") << (pro ? ", with the feeding elementwise chain fused into its loads" : "")
      << (inner_n == 1 ? (warp ? "; a warp per row" : "; a block per row")
                       : (!r.normalizes() && !epi ? "; each output's column in slices, a warp per slice and a lane per output"
                                                  : "; a thread per output"))
      << (cache ? "; the row kept in registers between the passes" : "")
      << (smem ? "; the row kept in shared memory between the passes" : "") << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
    plan_step step;
    step.kind = "kernel";
    step.name = name;
    step.block = {std::to_string(B), "1", "1"};
    if (inner_n == 1 && outer_n == 1 && !r.normalizes() && in.shape.size() > 0) {
      // A reduction of everything: one row would be one block for the whole tensor.
      // Instead, blocks reduce grid-strided slices into partial states, and a second
      // kernel of one block combines them (deterministic: no atomics).
      const std::string P = "PARTS" + std::to_string(si);
      out_.plan.constants[P] = "max(1, min(1024, ceil_div(" + paren(product(red)) + ", " + std::to_string(B * 8) + ")))";
      const std::string part = "partial" + std::to_string(si);
      out_.plan.scratch.push_back({part, {std::to_string(a.state.size()) + " * " + P}, "float32", "none"});
      // Kernel A writes the partials: rebuild its parameters with the scratch as output.
      kernel_params ka = kp;
      ka.decls.pop_back();
      ka.args.pop_back();
      const std::string PART = ka.tensor_out(part);
      k.str("");
      k << "\n// " << r.op << " of a whole tensor, first pass: each block reduces a grid-strided slice" << (pro ? " (with the feeding chain fused into its loads)" : "") << ".\n";
      k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "_part(" << join(ka.decls, ", ") << ") {\n";
      k << decl;
      if (r.acc == acc_kind::moments) k << load("0", "shift");
      k << "  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < " << C << "; c += (long long)gridDim.x * blockDim.x) {\n"
        << load("c", "v") << "    " << a.update << "\n  }\n";
      k << block_combine(r, a);
      k << "  if (threadIdx.x == 0) {";
      for (size_t q = 0; q < a.state.size(); ++q) k << " " << PART << "[" << q << " * gridDim.x + blockIdx.x] = " << a.state[q] << ";";
      k << " }\n}\n";
      plan_step sa;
      sa.kind = "kernel";
      sa.name = name + "_part";
      sa.grid = {P, "1", "1"};
      sa.block = {std::to_string(B), "1", "1"};
      sa.args = ka.args;
      out_.plan.steps.push_back(sa);
      // Kernel B: one block over the partials.
      kernel_params kb;
      const std::string PIN = kb.tensor_in(part);
      const std::string NP = kb.int64(P);
      const std::string CB = kb.int64(product(red));
      const std::string OUTB = kb.tensor_out(tensor_of_.at(r.output));
      k << "\n// " << r.op << " of a whole tensor, second pass: one block combines the partial states.\n";
      k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "_final(" << join(kb.decls, ", ") << ") {\n";
      k << decl;
      k << "  for (long long b = threadIdx.x; b < " << NP << "; b += blockDim.x) {\n";
      std::vector<std::string> other;
      for (size_t q = 0; q < a.state.size(); ++q) {
        k << "    const float p_" << a.state[q] << " = " << PIN << "[" << q << " * " << NP << " + b];\n";
        other.push_back("p_" + a.state[q]);
      }
      k << "    " << merge(r, other) << "\n  }\n";
      k << block_combine(r, a);
      k << "  if (threadIdx.x == 0) " << OUTB << "[0] = " << finish(r, CB) << ";\n}\n";
      src_ += k.str();
      plan_step sb;
      sb.kind = "kernel";
      sb.name = name + "_final";
      sb.grid = {"1", "1", "1"};
      sb.block = {std::to_string(B), "1", "1"};
      sb.args = kb.args;
      out_.plan.steps.push_back(sb);
      written_.insert(r.output);
      return {};
    }
    if (inner_n == 1) {
      out_.longest_row = std::max(out_.longest_row, row_len);
      // In a row, i = row * C + c with 0 <= c < C: an operand broadcast along the rows
      // (i % C) is at c, one broadcast along the row (i / C) at row; no 64-bit division
      // per element.
      epi_code = replace_all(replace_all(epi_code, "(i % " + C + ")", "c"), "(i / " + C + ")", "row");
      if (warp) {
        k << "  const int lane = threadIdx.x & 31;\n";
        k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
        k << "  if (row >= " << ROWS << ") return;  // the whole warp leaves together\n";
      } else {
        k << "  const long long row = blockIdx.x;\n";
      }
      k << "  const long long base = row * " << C << ";\n";
      k << decl;
      if (r.acc == acc_kind::moments) k << load("base", "shift");
      std::string loop = "  for (long long c = " + lane + "; c < " + C + "; c += " + width + ")";
      const std::string full_loop = loop;
      if (vec_rows) {
        k << "  const long long c4n = (" << C << " & 3) == 0 ? " << C << " / 4 : 0;\n";
        k << "  for (long long c4 = " << lane << "; c4 < c4n; c4 += " << width << ") {\n";
        k << "    const float4 q = reinterpret_cast<const float4*>(" << X << " + base)[c4];\n";
        for (auto* l : lanes4) k << "    { const float v = q." << l << "; " << a.update << " }\n";
        k << "  }\n";
        loop = "  for (long long c = c4n * 4 + " + lane + "; c < " + C + "; c += " + width + ")";
      }
      const std::string cached_c = "    const long long c = " + lane + " + (long long)k * " + width + ";\n";
      const bool online = r.acc == acc_kind::online;
      if (cache) {
        const bool need_rv = keep_value || online;
        for (auto& P : row_params) k << "  float rc_" << P << "[" << K << "];\n";
        if (need_rv) k << "  float rv[" << K << "];\n";
        const std::string each = "#pragma unroll\n  for (int k = 0; k < " + std::to_string(K) + "; ++k) {\n" + cached_c +
                                 "    if (c < " + C + ") {\n";
        k << each << "    const long long i = base + c;\n";
        for (auto& P : row_params) k << "    rc_" << P << "[k] = " << P << "[i];\n";
        k << "    }\n  }\n";
        k << each << "    const long long i = base + c;\n    (void)i;\n";
        if (pro) k << from_cache(load_code) << "    const float v = " << var.at(r.input) << ";\n";
        else k << "    const float v = " << from_cache(X + "[i]") << ";\n";
        if (need_rv) k << "    rv[k] = v;\n";
        if (!online) k << "    " << a.update << "\n";
        k << "    }\n  }\n";
        if (online) {
          // The cached part's max, then its sum: no branch per element. A thread whose
          // cached elements are all -inf (a masked row) adds exp(-inf) = 0, not
          // exp(-inf - -inf) = NaN.
          k << each << "    m = fmaxf(m, rv[k]);\n    }\n  }\n";
          k << "  const float mref = m == -KS_INF ? 0.0f : m;\n";
          // The softmax keeps exp(v - the thread's max) in rv, so pass 2 needs no exp
          // (each thread rescales its own values by one factor).
          store_exp = keep_value && r.op == "softmax";
          if (store_exp) k << each << "    rv[k] = KS_EXP(rv[k] - mref);\n    s += rv[k];\n    }\n  }\n";
          else k << each << "    s += KS_EXP(rv[k] - mref);\n    }\n  }\n";
        }
        loop = "  for (long long c = " + lane + " + (long long)" + std::to_string(K) + " * " + width + "; c < " + C +
               "; c += " + width + ")";
      } else if (smem) {
        uses_smem_ = true;
        const int64_t cap = kSharedRow / static_cast<int64_t>(row_params.size());
        k << "  KS_DYNAMIC_SHARED(ks_row);\n";
        k << "  const int cc = (int)(" << C << " < " << cap << " ? " << C << " : " << cap << ");\n";
        k << "  const bool v4 = (" << C << " & 3) == 0;  // rows 16-byte aligned: float4 copies, loads and stores\n";
        for (size_t q = 0; q < row_params.size(); ++q)
          k << "  float* const sh_" << row_params[q] << " = reinterpret_cast<float*>(ks_row) + " << q << " * cc;\n";
        // Every loop over the staged part gives a thread the same elements as its
        // copies, so a thread reads back only what it copied: waiting for its own
        // copies is enough, no barrier.
        k << "  if (v4) {\n    for (int c4 = " << lane << "; c4 < cc / 4; c4 += " << width << ") {\n";
        for (auto& P : row_params) k << "      ks_cp_async16(sh_" << P << " + c4 * 4, " << P << " + base + c4 * 4);\n";
        k << "    }\n  } else {\n    for (int c = " << lane << "; c < cc; c += " << width << ") {\n";
        for (auto& P : row_params) k << "      ks_cp_async4(sh_" << P << " + c, " << P << " + base + c);\n";
        k << "    }\n  }\n  ks_cp_async_wait();\n";
        // Pass 1 over the staged part. A prologue's value replaces the raw element in
        // place when nothing reads the raw row again, so later loops do not recompute
        // it; the softmax stores exp(v - the thread's max) there too, so pass 2 needs no
        // exp (each thread rescales its own part by one factor).
        const std::string X0 = row_params.front();
        in_place = r.normalizes() && row_params.size() == 1 && !reads_at(epi_code, X0, "i");
        store_exp = in_place && online && r.op == "softmax";
        const bool write_value = in_place && pro;
        k << staged(
            [&](const lane_io& io) {
              return staged_value(io, false) + (write_value ? write_back(X0, "v", io) : "") + "      " +
                     (online ? std::string("m = fmaxf(m, v);") : a.update) + "\n";
            },
            write_value ? std::vector<std::string>{X0} : std::vector<std::string>{}, {});
        if (online) {
          // The staged part's max, then its sum: no branch per element. A thread whose
          // staged elements are all -inf (a masked row) adds exp(-inf) = 0, not
          // exp(-inf - -inf) = NaN.
          k << "  const float mref = m == -KS_INF ? 0.0f : m;\n";
          k << staged(
              [&](const lane_io& io) {
                if (!store_exp) return staged_value(io, in_place) + "      s += KS_EXP(v - mref);\n";
                return staged_value(io, true) + "      const float e = KS_EXP(v - mref);\n      s += e;\n" +
                       write_back(X0, "e", io);
              },
              store_exp ? std::vector<std::string>{X0} : std::vector<std::string>{}, {});
        }
        loop = "  for (long long c = cc + " + lane + "; c < " + C + "; c += " + width + ")";
      }
      k << loop << " {\n" << load("base + c", "v") << "    " << a.update << "\n  }\n";
      k << (warp ? warp_combine(r, a) : block_combine(r, a));
      if (smem) {
        // Pass 2: the staged part from shared memory (float4 stores where rows are
        // 16-byte aligned), then the rest from memory.
        std::vector<std::string> outs;
        if (!epi) outs.push_back(OUT);
        for (auto& [v, param] : epi_out) outs.push_back(param);
        k << pass2_head();
        k << staged(
            [&](const lane_io& io) {
              std::string t;
              if (r.normalizes()) {
                t = staged_value(io, in_place);
                const std::string yv = store_exp ? std::string("v * kt") : y;
                if (!epi) return t + store_out(OUT, yv, io);
                t += "      const float red = " + yv + ";\n";
              }
              t += "      const long long i = base + c;\n      (void)i;\n" + staged_reads(epi_code, io);
              for (auto& [v, param] : epi_out) t += store_out(param, epi_var.at(v), io);
              return t;
            },
            {}, outs);
        k << pass2_from(loop);
      } else if (cache) {
        // Pass 2: the cached part from registers, then the rest from memory.
        k << pass2_head();
        k << "#pragma unroll\n  for (int k = 0; k < " << K << "; ++k) {\n" << cached_c << "    if (c < " << C << ") {\n";
        if (r.normalizes()) {
          k << "    const float v = rv[k];\n" << from_cache(pass2_body("base + c", store_exp ? "v * kt" : ""));
        } else {
          k << "    const long long i = base + c;\n" << from_cache(epi_code);
          for (auto& [v, param] : epi_out) k << "    " << param << "[i] = " << epi_var.at(v) << ";\n";
        }
        k << "    }\n  }\n";
        k << pass2_from(loop);
      } else if (r.normalizes() && epi) {
        k << second_pass(full_loop, "base + c");
      } else if (r.normalizes() && vec_rows) {
        k << prelude;
        k << "  for (long long c4 = " << lane << "; c4 < c4n; c4 += " << width << ") {\n";
        k << "    const float4 q = reinterpret_cast<const float4*>(" << X << " + base)[c4];\n    float4 o4;\n";
        for (int l = 0; l < 4; ++l)
          k << "    { const long long c = c4 * 4 + " << l << "; (void)c; const float v = q." << lanes4[l] << "; o4." << lanes4[l] << " = " << y << "; }\n";
        k << "    reinterpret_cast<float4*>(" << OUT << " + base)[c4] = o4;\n  }\n";
        k << loop << " {\n" << load("base + c", "v") << "    " << OUT << "[base + c] = " << y << ";\n  }\n";
      } else if (r.normalizes()) {
        k << second_pass(loop, "base + c");
      } else if (epi) {
        k << pass2_head() << pass2_from(full_loop);
      } else {
        k << "  if (" << lane << " == 0) " << OUT << "[row] = " << finish(r, C) << ";\n";
      }
      std::string rpb = warp ? std::to_string(B / 32) : "1";
      step.grid = {warp ? "ceil_div(" + paren(product(outer)) + ", " + rpb + ")" : product(outer), "1", "1"};
      if (smem)
        step.shared_mem = std::to_string(4 * row_params.size()) + " * min(" + product(red) + ", " +
                          std::to_string(kSharedRow / static_cast<int64_t>(row_params.size())) + ")";
    } else if (!r.normalizes() && !epi) {
      // A middle dim reduced to one value per output: a thread per output would leave
      // too few loads in flight (outputs are few, columns long). Each output's column
      // is cut into S = B/32 slices instead, one warp per slice with a lane per output
      // (32 consecutive outputs: coalesced along the inner dims), and the slices'
      // states are combined in shared memory, in slice order.
      const int S = B / 32;
      k << "  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;\n";
      k << "  const long long t = (long long)blockIdx.x * 32 + lane;\n";
      k << "  const bool live = t < " << ROWS << " * " << INNER << ";\n";
      k << "  const long long o = live ? t / " << INNER << " : 0, j = live ? t % " << INNER << " : 0;\n";
      k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
      k << decl;
      if (r.acc == acc_kind::moments) k << load("base", "shift");
      k << "  if (live) {\n#pragma unroll 4\n  for (long long c = slice; c < " << C << "; c += " << S << ") {\n"
        << load("base + c * " + INNER, "v") << "    " << a.update << "\n  }\n  }\n";
      for (auto& v : a.state) k << "  __shared__ float sh_" << v << "[" << S << "][33];\n";
      for (auto& v : a.state) k << "  sh_" << v << "[slice][lane] = " << v << ";\n";
      k << "  __syncthreads();\n  if (slice != 0 || !live) return;\n";
      k << "  for (int q = 1; q < " << S << "; ++q) {\n";
      std::vector<std::string> other;
      for (auto& v : a.state) {
        k << "    const float p_" << v << " = sh_" << v << "[q][lane];\n";
        other.push_back("p_" + v);
      }
      k << "    " << merge(r, other) << "\n  }\n";
      k << "  " << OUT << "[t] = " << finish(r, C) << ";\n";
      step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", 32)", "1", "1"};
    } else {
      k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
      k << "  if (t >= " << ROWS << " * " << INNER << ") return;\n";
      k << "  const long long o = t / " << INNER << ", j = t % " << INNER << ";\n";
      k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
      k << decl;
      if (r.acc == acc_kind::moments) k << load("base", "shift");
      std::string loop = "  for (long long c = 0; c < " + C + "; ++c)";
      k << loop << " {\n" << load("base + c * " + INNER, "v") << "    " << a.update << "\n  }\n";
      if (r.normalizes()) {
        if (r.op == "layer_norm") return error{"layer_norm over a middle dim cannot happen"};
        k << second_pass(loop, "base + c * " + INNER);
      } else {
        k << "  " << OUT << "[t] = " << finish(r, C) << ";\n";
      }
      step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", " + std::to_string(B) + ")", "1", "1"};
    }
    k << "}\n";
    if (r.acc == acc_kind::moments && r.op != "layer_norm") {
      // var/std read `shift` too; nothing else to add.
    }
    src_ += k.str();
    step.args = kp.args;
    out_.plan.steps.push_back(step);
    written_.insert(r.output);
    (void)outer_n;
    return {};
  }

  // -------------------------------------------------------------------------------
  // Scans (cumsum, cumprod) along one dim. The last dim: a warp per row, tiles of
  // 128 elements (4 consecutive per lane, a warp scan of the lane totals, the running
  // carry added). Another dim: a thread per (outer, inner) position, in order.
  status emit_scan(size_t si) {
    const graph_node& n = *stages_[si].nodes[0];
    const bool sum = base_kind(n.kind) == "aten::cumsum";
    const shaped& in = shapes_.at(n.inputs[0]);
    const int64_t rank = static_cast<int64_t>(in.shape.size());
    if (rank == 0) return error{n.kind + " of a 0-d tensor is not supported by the rules coder"};
    const int64_t dim = normalize_dim(static_cast<int64_t>(val(n.inputs[1]).numbers.at(0)), in.shape.size());
    kernel_params kp;
    std::vector<std::string> outer(in.sym.begin(), in.sym.begin() + dim), inner(in.sym.begin() + dim + 1, in.sym.end());
    const std::string ROWS = kp.int64(product(outer)), C = kp.int64(in.sym[dim]);
    const bool last = dim == rank - 1;
    std::string INNER = last ? "1" : kp.int64(product(inner));
    const std::string X = kp.tensor_in(tensor_of_.at(n.inputs[0]));
    auto epi = fused_epilogue(si, n.outputs[0], "i", kp);
    if (!epi) return epi.error();
    const bool fused = stages_[si].epilogue >= 0;
    const std::string Y = fused ? std::string() : kp.tensor_out(tensor_of_.at(n.outputs[0]));
    const std::string id = sum ? "0.0f" : "1.0f";
    // A running sum carries its rounding along the row: two fp32 orders of 4096 normal
    // values differ by ~2e-4 where the sum crosses zero. Summed in double, ours is
    // within an fp32 rounding of the exact running sum (the kernel stays at memory
    // speed: H200 adds doubles at half the float rate). Products keep float.
    const std::string T = sum ? "double" : "float";
    auto op = [&](const std::string& a, const std::string& b) { return sum ? a + " + " + b : a + " * " + b; };
    const int B = p_.block_size;
    std::string name = kernel_name(si, sum ? "cumsum" : "cumprod");
    std::ostringstream k;
    k << "\n// " << (sum ? "cumsum" : "cumprod") << " along " << (last ? "the last dim: a warp per row" : "a middle dim: a thread per position")
      << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
    plan_step step;
    step.kind = "kernel";
    step.name = name;
    step.block = {std::to_string(B), "1", "1"};
    if (last) {
      k << "  const int lane = threadIdx.x & 31;\n";
      k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
      k << "  if (row >= " << ROWS << ") return;  // the whole warp leaves together\n";
      k << "  const float* xr = " << X << " + row * " << C << ";\n";
      if (!fused) k << "  float* yr = " << Y << " + row * " << C << ";\n";
      k << "  " << T << " carry = " << id << ";\n";
      k << "  for (long long t0 = 0; t0 < " << C << "; t0 += 128) {\n";
      k << "    const long long c0 = t0 + lane * 4;\n    " << T << " v[4];\n";
      k << "#pragma unroll\n    for (int q = 0; q < 4; ++q) v[q] = c0 + q < " << C << " ? xr[c0 + q] : " << id << ";\n";
      k << "#pragma unroll\n    for (int q = 1; q < 4; ++q) v[q] = " << op("v[q - 1]", "v[q]") << ";\n";
      k << "    " << T << " s = v[3];\n";
      k << "    for (int o = 1; o < 32; o <<= 1) {\n      const " << T << " up = __shfl_up_sync(0xffffffffu, s, o);\n      if (lane >= o) s = " << op("up", "s") << ";\n    }\n";
      k << "    " << T << " before = __shfl_up_sync(0xffffffffu, s, 1);\n    if (lane == 0) before = " << id << ";\n";
      k << "    before = " << op("carry", "before") << ";\n";
      if (fused)
        k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (c0 + q < " << C << ") {\n    const float res = (float)("
          << op("before", "v[q]") << ");\n    const long long i = row * " << C << " + c0 + q;\n"
          << epi->code << epi->stores << "      }\n";
      else
        k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (c0 + q < " << C << ") yr[c0 + q] = (float)(" << op("before", "v[q]") << ");\n";
      k << "    carry = " << op("carry", "__shfl_sync(0xffffffffu, s, 31)") << ";\n  }\n}\n";
      step.grid = {"ceil_div(" + paren(product(outer)) + ", " + std::to_string(B / 32) + ")", "1", "1"};
    } else {
      k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
      k << "  if (t >= " << ROWS << " * " << INNER << ") return;\n";
      k << "  const long long o = t / " << INNER << ", j = t % " << INNER << ";\n";
      k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
      k << "  " << T << " acc = " << id << ";\n";
      k << "  for (long long c = 0; c < " << C << "; ++c) {\n    acc = " << op("acc", X + "[base + c * " + INNER + "]") << ";\n";
      if (fused)
        k << "    const float res = (float)acc;\n    const long long i = base + c * " << INNER << ";\n" << epi->code << epi->stores << "  }\n}\n";
      else
        k << "    " << Y << "[base + c * " << INNER << "] = (float)acc;\n  }\n}\n";
      step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", " + std::to_string(B) + ")", "1", "1"};
    }
    src_ += k.str();
    step.args = kp.args;
    out_.plan.steps.push_back(step);
    written_.insert(n.outputs[0]);
    return {};
  }

  // -------------------------------------------------------------------------------
  // Pooling over the last two dims (NCHW or CHW): a thread per output element.

  result<pool_spec> read_pool(const graph_node& n, const std::string& kind) const {
    pool_spec p;
    p.max = kind == "aten::max_pool2d";
    auto pair = [&](size_t k, int64_t* out, bool may_be_empty) -> status {
      const auto& v = val(n.inputs.at(k)).numbers;
      if (v.empty() && may_be_empty) return {};
      if (v.empty() || v.size() > 2) return error{kind + ": argument " + std::to_string(k) + " is not 1 or 2 integers"};
      out[0] = static_cast<int64_t>(v[0]);
      out[1] = static_cast<int64_t>(v.size() == 2 ? v[1] : v[0]);
      return {};
    };
    if (auto s = pair(1, p.kernel, false); !s) return error{s.message()};
    p.stride[0] = p.kernel[0];
    p.stride[1] = p.kernel[1];
    if (auto s = pair(2, p.stride, true); !s) return error{s.message()};
    if (auto s = pair(3, p.pad, false); !s) return error{s.message()};
    if (p.max) {
      if (auto s = pair(4, p.dil, false); !s) return error{s.message()};
      if (!val(n.inputs.at(5)).numbers.empty() && val(n.inputs[5]).numbers[0] != 0)
        return error{kind + " with ceil_mode is not supported by the rules coder"};
      if (n.outputs.size() > 1) return error{kind + " with indices is not supported by the rules coder"};
    } else {
      if (!val(n.inputs.at(4)).numbers.empty() && val(n.inputs[4]).numbers[0] != 0)
        return error{kind + " with ceil_mode is not supported by the rules coder"};
      p.count_include_pad = val(n.inputs.at(5)).numbers.empty() || val(n.inputs[5]).numbers[0] != 0;
      if (n.inputs.size() > 6 && !val(n.inputs[6]).is_none()) p.divisor = val(n.inputs[6]).numbers.at(0);
    }
    return p;
  }

  status emit_pool(size_t si) {
    const graph_node& n = *stages_[si].nodes[0];
    auto p = read_pool(n, base_kind(n.kind));
    if (!p) return error{p.message()};
    const shaped& in = shapes_.at(n.inputs[0]);
    const shaped& out = shapes_.at(n.outputs[0]);
    const size_t r = in.sym.size();
    kernel_params kp;
    const std::string X = kp.tensor_in(tensor_of_.at(n.inputs[0]));
    const std::string H = kp.int64(in.sym[r - 2]), W = kp.int64(in.sym[r - 1]);
    const std::string OH = kp.int64(out.sym[r - 2]), OW = kp.int64(out.sym[r - 1]);
    const std::string N = kp.int64(product(out.sym));
    auto epi = fused_epilogue(si, n.outputs[0], "t", kp);
    if (!epi) return epi.error();
    const bool fused = stages_[si].epilogue >= 0;
    const std::string Y = fused ? std::string() : kp.tensor_out(tensor_of_.at(n.outputs[0]));
    const int B = p_.block_size;
    std::string name = kernel_name(si, p->max ? "max_pool2d" : "avg_pool2d");
    std::ostringstream k;
    k << "\n// " << (p->max ? "max" : "avg") << "_pool2d " << p->kernel[0] << "x" << p->kernel[1] << ", stride "
      << p->stride[0] << "x" << p->stride[1] << ", padding " << p->pad[0] << "x" << p->pad[1] << ": a thread per output element"
      << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
    k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
    k << "  if (t >= " << N << ") return;\n";
    // 64-bit division costs a hundred instructions a call, which would make the kernel
    // compute bound: below 2^31 outputs the index splits in 32 bits.
    k << "  long long ow, oh, plane;\n";
    k << "  if (" << N << " <= 0x7fffffffLL) {\n";
    k << "    const unsigned u = (unsigned)t, q = u / (unsigned)" << OW << ";\n";
    k << "    ow = u - q * (unsigned)" << OW << "; oh = q % (unsigned)" << OH << "; plane = q / (unsigned)" << OH << ";\n";
    k << "  } else {\n";
    k << "    ow = t % " << OW << "; oh = (t / " << OW << ") % " << OH << "; plane = t / (" << OW << " * " << OH << ");\n  }\n";
    k << "  const float* xp = " << X << " + plane * " << H << " * " << W << ";\n";
    k << "  const long long h0 = oh * " << p->stride[0] << " - " << p->pad[0] << ", w0 = ow * " << p->stride[1] << " - " << p->pad[1] << ";\n";
    k << "  float acc = " << (p->max ? "-KS_INF" : "0.0f") << ";\n  int count = 0;\n";
    k << "#pragma unroll\n  for (int i = 0; i < " << p->kernel[0] << "; ++i) {\n";
    k << "    const long long h = h0 + i * " << p->dil[0] << ";\n    if (h < 0 || h >= " << H << ") continue;\n";
    k << "#pragma unroll\n    for (int j = 0; j < " << p->kernel[1] << "; ++j) {\n";
    k << "      const long long w = w0 + j * " << p->dil[1] << ";\n      if (w < 0 || w >= " << W << ") continue;\n";
    k << "      const float v = xp[h * " << W << " + w];\n";
    k << (p->max ? "      acc = (v > acc || v != v) ? v : acc;\n" : "      acc += v;\n") << "      ++count;\n    }\n  }\n";
    if (p->max) {
      k << "  const float res = acc;\n";
    } else {
      std::string div;
      if (p->divisor != 0) div = flit(p->divisor);
      else if (p->count_include_pad) {
        // PyTorch counts padding inside the padded input, but not past it.
        k << "  const long long he = min(h0 + " << p->kernel[0] << ", " << H << " + " << p->pad[0] << "), we = min(w0 + "
          << p->kernel[1] << ", " << W << " + " << p->pad[1] << ");\n";
        div = "(float)((he - h0) * (we - w0))";
      } else {
        div = "(float)count";
      }
      k << "  const float res = acc / " << div << ";\n";
    }
    if (fused) k << epi->code << epi->stores;
    else k << "  " << Y << "[t] = res;\n";
    k << "  (void)count;\n}\n";
    src_ += k.str();
    plan_step step;
    step.kind = "kernel";
    step.name = name;
    step.grid = {"ceil_div(" + paren(product(out.sym)) + ", " + std::to_string(B) + ")", "1", "1"};
    step.block = {std::to_string(B), "1", "1"};
    step.args = kp.args;
    out_.plan.steps.push_back(step);
    written_.insert(n.outputs[0]);
    return {};
  }

  // -------------------------------------------------------------------------------
  // A fallback: the op through ATen's dispatcher by its schema. Tensors are the step's
  // positional args (in the schema's order); every other argument is an attribute
  // named as in the schema, with the graph's constant as text.
  status emit_fallback(size_t si) {
    const graph_node& n = *stages_[si].nodes[0];
    auto sch = parse_op_schema(n.schema);
    if (!sch) return error{n.kind + ": " + sch.message()};
    const std::string where = n.kind + " (value " + n.outputs.at(0) + "), run as a library step because " +
                              stages_[si].fallback + ": ";
    plan_step step;
    step.kind = "library";
    step.name = sch->qualified();
    step.attrs["schema"] = n.schema;
    auto tensor = [&](const std::string& id) -> result<std::string> {
      auto it = tensor_of_.find(id);
      if (it == tensor_of_.end()) return error{where + "its operand " + id + " is not a tensor of the plan"};
      return it->second;
    };
    for (size_t k = 0; k < sch->args.size(); ++k) {
      const op_schema_arg& a = sch->args[k];
      const std::string& id = n.inputs[k];
      const graph_value& v = val(id);
      if (v.is_tensor()) {
        auto t = tensor(id);
        if (!t) return t.error();
        step.args.push_back({"tensor", *t, ""});
        continue;
      }
      if (a.is_tensor_list() && !v.is_none()) {
        auto it = list_of_.find(id);
        if (it == list_of_.end()) return error{where + "its argument " + a.name + " is a tensor list not built in the graph"};
        for (auto& e : it->second) {
          auto t = tensor(e);
          if (!t) return t.error();
          step.args.push_back({"tensor", *t, ""});
        }
        step.attrs[a.name] = std::to_string(it->second.size()) + " tensors";
        continue;
      }
      if (v.type == "Device") {
        step.attrs[a.name] = "inputs";  // the device the plan runs on
        continue;
      }
      if (!v.constant && !v.is_none())
        return error{where + "its argument " + a.name + " (value " + id + ") is computed at run time; an attribute is fixed text"};
      auto text = attr_text(v);
      if (!text) return error{where + "argument " + a.name + ": " + text.message()};
      step.attrs[a.name] = *text;
    }
    size_t last = 0;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (tensor_of_.count(n.outputs[k])) last = k + 1;
    for (size_t k = 0; k < last; ++k) {
      const std::string& v = n.outputs[k];
      auto it = tensor_of_.find(v);
      // A result nothing reads still needs a name to keep the others in place.
      step.outputs.push_back(it != tensor_of_.end() ? it->second : "unused_" + ident(v).substr(1));
      written_.insert(v);
    }
    out_.plan.steps.push_back(step);
    return {};
  }

  static result<std::string> attr_text(const graph_value& v) {
    auto number = [&](double x, bool integer) {
      if (integer) return std::to_string(static_cast<int64_t>(x));
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", x);
      return std::string(buf);
    };
    if (v.is_none()) return std::string("None");
    if (v.type == "bool") return std::string(v.numbers.at(0) != 0 ? "True" : "False");
    if (v.type == "int" || v.type == "float") return number(v.numbers.at(0), v.type == "int");
    if (v.type == "str") return v.text;
    if (v.type == "int[]" || v.type == "float[]" || v.type == "bool[]") {
      std::string s = "[";
      for (size_t i = 0; i < v.numbers.size(); ++i) {
        s += i ? ", " : "";
        s += v.type == "bool[]" ? (v.numbers[i] != 0 ? "True" : "False") : number(v.numbers[i], v.type == "int[]");
      }
      return s + "]";
    }
    return error{"a " + v.type + " cannot be written as an attribute"};
  }

  status emit_library(size_t si) {
    const graph_node& n = *stages_[si].nodes[0];
    std::string kind = base_kind(n.kind);
    plan_step step;
    step.kind = "library";
    step.name = kind;
    auto tensor_arg = [&](size_t k) -> result<std::string> {
      auto it = tensor_of_.find(n.inputs.at(k));
      if (it == tensor_of_.end()) return error{kind + ": operand " + n.inputs[k] + " is not a tensor of the plan"};
      return it->second;
    };
    size_t tensors = kind == "aten::addmm" ? 3 : 2;
    if (kind == "aten::linear" || kind == "aten::conv2d") tensors = val(n.inputs[2]).is_none() ? 2 : 3;
    for (size_t k = 0; k < tensors; ++k) {
      auto t = tensor_arg(k);
      if (!t) return error{t.message()};
      step.args.push_back({"tensor", *t, ""});
    }
    auto list_text = [&](size_t k) {
      std::string s = "[";
      for (size_t q = 0; q < val(n.inputs[k]).numbers.size(); ++q)
        s += (q ? ", " : "") + std::to_string(static_cast<int64_t>(val(n.inputs[k]).numbers[q]));
      return s + "]";
    };
    if (kind == "aten::addmm") {
      step.attrs["beta"] = std::to_string(val(n.inputs[3]).numbers.at(0));
      step.attrs["alpha"] = std::to_string(val(n.inputs[4]).numbers.at(0));
    } else if (kind == "aten::conv2d") {
      step.attrs["stride"] = list_text(3);
      step.attrs["padding"] = list_text(4);
      step.attrs["dilation"] = list_text(5);
      step.attrs["groups"] = std::to_string(static_cast<int64_t>(val(n.inputs[6]).numbers.at(0)));
    }
    const std::string& v = n.outputs[0];
    auto it = tensor_of_.find(v);
    if (it == tensor_of_.end()) return error{kind + ": result " + v + " is used by nothing"};
    step.outputs = {it->second};
    out_.plan.steps.push_back(step);
    written_.insert(v);
    return {};
  }
};

}  // namespace

result<lowered_kernel_set> lower_graph(const task_graph& graph, const lowering_params& params,
                                       const target_shapes& target) {
  lowerer l(graph, params, target);
  auto r = l.run();
  if (!r) return error{"task \"" + graph.task + "\": " + r.message()};
  return r;
}

}  // namespace ks
