#include "plan/plan_validator.hpp"

#include "base/strings.hpp"
#include "plan/attr_parse.hpp"
#include "plan/op_schema.hpp"

#include "base/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

namespace ks {

// ---------------------------------------------------------------------------
// Small public helpers

const char* to_string(buffer_role r) {
  switch (r) {
    case buffer_role::input:
      return "input";
    case buffer_role::output:
      return "output";
    case buffer_role::scratch:
      return "scratch";
    case buffer_role::intermediate:
      return "intermediate";
  }
  return "?";
}

int64_t resolved_buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t resolved_buffer::bytes() const { return numel() * dtype_size(dtype); }

std::string resolved_step::label() const { return "step " + std::to_string(index) + " (" + kind + " " + name + ")"; }

const resolved_buffer* resolved_plan::find_buffer(std::string_view name) const {
  for (auto* list : {&outputs, &scratch, &intermediates})
    for (auto& b : *list)
      if (b.name == name) return &b;
  return nullptr;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

result<plan_context> make_plan_context(const task_spec& task, std::string_view source, std::string_view size) {
  plan_context ctx;
  const std::map<std::string, std::vector<int64_t>>* sized = nullptr;
  if (!size.empty()) {
    auto it = task.sizes.find(std::string(size));
    if (it == task.sizes.end()) {
      std::string known;
      for (auto& [k, v] : task.sizes) known += (known.empty() ? "" : ", ") + k;
      return error{"task '" + task.name + "' has no size '" + std::string(size) + "'" +
                   (known.empty() ? std::string(" (it defines none)") : "; its sizes: " + known)};
    }
    sized = &it->second;
  }
  for (auto* list : {&task.inputs, &task.parameters})
    for (auto& t : *list) {
      tensor_info info{t.shape, t.dtype};
      if (sized) {
        auto s = sized->find(t.name);
        if (s != sized->end()) info.shape = s->second;
      }
      ctx.inputs[t.name] = info;
    }
  ctx.kernels = extract_kernel_signatures(source);
  return ctx;
}

namespace {

std::string did_you_mean(std::string_view word, const std::vector<std::string>& options) {
  std::string best = closest(word, options);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// The dtype a kernel pointer of this kind points at, or "" when it says nothing.
std::string dtype_of(scalar_kind k) {
  switch (k) {
    case scalar_kind::int32:
      return "int32";
    case scalar_kind::int64:
      return "int64";
    case scalar_kind::float32:
      return "float32";
    case scalar_kind::float64:
      return "float64";
    case scalar_kind::float16:
      return "float16";
    case scalar_kind::bfloat16:
      return "bfloat16";
    case scalar_kind::boolean:
      return "bool";
    case scalar_kind::other:
      return "";
  }
  return "";
}

bool is_float_dtype(const std::string& d) {
  return d == "float32" || d == "float64" || d == "float16" || d == "bfloat16";
}

// torch's type promotion, reduced to the plan dtypes.
std::string promote(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return "";
  if (a == b) return a;
  auto rank = [](const std::string& d) {
    if (d == "bool") return 0;
    if (d == "int32") return 1;
    if (d == "int64") return 2;
    if (d == "float16" || d == "bfloat16") return 3;
    if (d == "float32") return 4;
    return 5;  // float64
  };
  if (rank(a) == 3 && rank(b) == 3) return "float32";  // float16 with bfloat16
  return rank(a) >= rank(b) ? a : b;
}

// ---------------------------------------------------------------------------
// Shape inference for library ops

struct lib_input {
  std::string name;  // tensor name, or the expression of a scalar
  bool is_tensor = false;
  bool known = true;  // tensor with a known shape and dtype
  tensor_info info;   // tensor
  bool scalar_float = false;
};

std::string describe(size_t i, const lib_input& in) {
  return "args[" + std::to_string(i) + "] '" + in.name + "' " + shape_to_string(in.info.shape);
}

result<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                       const std::string& what) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1)
      return error{what + ": shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                   " do not broadcast (dimension -" + std::to_string(i + 1) + ": " + std::to_string(x) + " vs " +
                   std::to_string(y) + ")"};
    out[n - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

status number_attr(const std::map<std::string, std::string>& attrs, const std::string& key) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return {};
  const std::string& t = it->second;
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size())
    return error{"attrs." + key + ": expected a number, got " + in_quotes(t)};
  return {};
}

using attrs_t = std::map<std::string, std::string>;
using infer_fn =
    std::function<result<tensor_info>(const std::string& op, const std::vector<lib_input>&, const attrs_t&)>;

struct known_op {
  size_t min_args, max_args;
  std::vector<std::string> attrs;
  size_t scalar_from;  // args at this index and after may be numbers; SIZE_MAX: tensors only
  infer_fn infer;
};

result<tensor_info> infer_matmul(const std::string& op, const std::vector<lib_input>& in, const attrs_t&) {
  const auto& a = in[0].info.shape;
  const auto& b = in[1].info.shape;
  std::string dtype = promote(in[0].info.dtype, in[1].info.dtype);
  auto inner_error = [&](int64_t ka, int64_t kb) {
    return error{"args: " + op + " of " + describe(0, in[0]) + " and " + describe(1, in[1]) +
                 ": inner dimensions differ (" + std::to_string(ka) + " vs " + std::to_string(kb) + ")"};
  };
  if (op == "aten::mm") {
    if (a.size() != 2)
      return error{"args[0]: aten::mm needs a 2-D tensor, '" + in[0].name + "' is " + shape_to_string(a)};
    if (b.size() != 2)
      return error{"args[1]: aten::mm needs a 2-D tensor, '" + in[1].name + "' is " + shape_to_string(b)};
    if (a[1] != b[0]) return inner_error(a[1], b[0]);
    return tensor_info{{a[0], b[1]}, dtype};
  }
  if (op == "aten::bmm") {
    if (a.size() != 3)
      return error{"args[0]: aten::bmm needs a 3-D tensor, '" + in[0].name + "' is " + shape_to_string(a)};
    if (b.size() != 3)
      return error{"args[1]: aten::bmm needs a 3-D tensor, '" + in[1].name + "' is " + shape_to_string(b)};
    if (a[0] != b[0])
      return error{"args: aten::bmm of " + describe(0, in[0]) + " and " + describe(1, in[1]) +
                   ": batch sizes differ (" + std::to_string(a[0]) + " vs " + std::to_string(b[0]) + ")"};
    if (a[2] != b[1]) return inner_error(a[2], b[1]);
    return tensor_info{{a[0], a[1], b[2]}, dtype};
  }
  // aten::matmul, with torch.matmul's rules for 1-D and batched operands.
  if (a.empty() || b.empty())
    return error{"args: aten::matmul needs tensors of at least 1 dimension, got " + describe(0, in[0]) + " and " +
                 describe(1, in[1])};
  std::vector<int64_t> a2 = a, b2 = b;
  if (a.size() == 1) a2.insert(a2.begin(), 1);
  if (b.size() == 1) b2.push_back(1);
  int64_t ka = a2[a2.size() - 1], kb = b2[b2.size() - 2];
  if (ka != kb) return inner_error(ka, kb);
  std::vector<int64_t> ba(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  auto batch = broadcast(ba, bb, "args: batch dimensions of aten::matmul");
  if (!batch.ok()) return batch.error();
  std::vector<int64_t> out = batch.value();
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2[b2.size() - 1]);
  return tensor_info{out, dtype};
}

result<tensor_info> infer_addmm(const std::string& op, const std::vector<lib_input>& in, const attrs_t& attrs) {
  for (const char* k : {"beta", "alpha"})
    if (auto s = number_attr(attrs, k); !s.ok()) return error{s.message()};
  std::vector<lib_input> ab = {in[1], in[2]};
  auto mm = infer_matmul("aten::mm", ab, attrs);
  if (!mm.ok()) {
    // Renumber: the matrices are args[1] and args[2] of addmm.
    std::string m = mm.message();
    for (auto [from, to] : {std::pair{"args[1]", "args[2]"}, std::pair{"args[0]", "args[1]"}}) {
      size_t p = 0;
      while ((p = m.find(from, p)) != std::string::npos) {
        m.replace(p, 7, to);
        p += 7;
      }
    }
    size_t p = m.find("aten::mm");
    if (p != std::string::npos) m.replace(p, 8, "aten::addmm");
    return error{m};
  }
  auto b = broadcast(in[0].info.shape, mm->shape, "args[0]: the bias of aten::addmm");
  if (!b.ok()) return b.error();
  if (b.value() != mm->shape)
    return error{"args[0]: the bias " + shape_to_string(in[0].info.shape) +
                 " does not broadcast to the product's shape " + shape_to_string(mm->shape)};
  return tensor_info{mm->shape, promote(mm->dtype, in[0].info.dtype)};
}

result<tensor_info> infer_linear(const std::string&, const std::vector<lib_input>& in, const attrs_t&) {
  const auto& x = in[0].info.shape;
  const auto& w = in[1].info.shape;
  if (x.empty()) return error{"args[0]: aten::linear needs an input of at least 1 dimension, got []"};
  if (w.size() != 1 && w.size() != 2)
    return error{"args[1]: the weight of aten::linear must be 2-D [out_features, in_features], '" + in[1].name +
                 "' is " + shape_to_string(w)};
  int64_t in_features = w.back();
  if (x.back() != in_features)
    return error{"args: aten::linear of " + describe(0, in[0]) + " with weight " + describe(1, in[1]) +
                 ": the input's last dimension " + std::to_string(x.back()) + " is not the weight's in_features " +
                 std::to_string(in_features)};
  std::vector<int64_t> out(x.begin(), x.end() - 1);
  if (w.size() == 2) out.push_back(w[0]);
  std::string dtype = promote(in[0].info.dtype, in[1].info.dtype);
  if (in.size() == 3) {
    auto b = broadcast(in[2].info.shape, out, "args[2]: the bias of aten::linear");
    if (!b.ok()) return b.error();
    if (b.value() != out)
      return error{"args[2]: the bias " + shape_to_string(in[2].info.shape) +
                   " does not broadcast to the output shape " + shape_to_string(out)};
    dtype = promote(dtype, in[2].info.dtype);
  }
  return tensor_info{out, dtype};
}

result<tensor_info> infer_conv2d(const std::string&, const std::vector<lib_input>& in, const attrs_t& attrs) {
  const auto& x = in[0].info.shape;
  const auto& w = in[1].info.shape;
  if (x.size() != 3 && x.size() != 4)
    return error{"args[0]: aten::conv2d needs an input [N, C, H, W] or [C, H, W], '" + in[0].name + "' is " +
                 shape_to_string(x)};
  if (w.size() != 4)
    return error{"args[1]: aten::conv2d needs a weight [out_channels, in_channels/groups, kH, kW], '" + in[1].name +
                 "' is " + shape_to_string(w)};
  auto stride_list = int_list_attr(attrs, "stride", 2, {1, 1});
  if (!stride_list) return stride_list.error();
  auto dilation_list = int_list_attr(attrs, "dilation", 2, {1, 1});
  if (!dilation_list) return dilation_list.error();
  const std::vector<int64_t>& stride = *stride_list;
  const std::vector<int64_t>& dilation = *dilation_list;
  std::vector<int64_t> padding{0, 0};
  bool same = false;
  if (auto it = attrs.find("padding"); it != attrs.end()) {
    if (it->second == "same")
      same = true;
    else if (it->second != "valid") {
      auto v = parse_int_list(it->second, 2, "attrs.padding");
      if (!v) return error{v.message() + " (or \"same\", \"valid\")"};
      padding = *v;
    }
  }
  auto groups_list = int_list_attr(attrs, "groups", 1, {1});
  if (!groups_list) return groups_list.error();
  const int64_t groups = (*groups_list)[0];
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1) return error{"attrs.stride: must be at least 1, got " + std::to_string(stride[i])};
    if (dilation[i] < 1) return error{"attrs.dilation: must be at least 1, got " + std::to_string(dilation[i])};
    if (padding[i] < 0) return error{"attrs.padding: must not be negative, got " + std::to_string(padding[i])};
  }
  if (groups < 1) return error{"attrs.groups: must be at least 1, got " + std::to_string(groups)};
  if (auto it = attrs.find("memory_format");
      it != attrs.end() && it->second != "contiguous" && it->second != "channels_last")
    return error{"attrs.memory_format: expected contiguous or channels_last, got \"" + it->second + "\""};
  if (auto it = attrs.find("memory_format"); it != attrs.end() && it->second == "channels_last" && x.size() != 4)
    return error{"attrs.memory_format: channels_last needs an input [N, C, H, W], '" + in[0].name + "' is " +
                 shape_to_string(x)};
  if (auto it = attrs.find("result_layout"); it != attrs.end() && it->second != "nchw" && it->second != "nhwc")
    return error{"attrs.result_layout: expected nchw or nhwc, got \"" + it->second + "\""};
  // nhwc: the result handed on as [N, H, W, C] (channels-last memory read as it lies).
  const bool nhwc = attrs.count("result_layout") && attrs.at("result_layout") == "nhwc";
  if (nhwc && x.size() != 4)
    return error{"attrs.result_layout: nhwc needs an input [N, C, H, W], '" + in[0].name + "' is " +
                 shape_to_string(x)};
  if (same && (stride[0] != 1 || stride[1] != 1)) return error{"attrs.padding: \"same\" needs stride 1, as in PyTorch"};
  bool batched = x.size() == 4;
  int64_t c = x[batched ? 1 : 0];
  if (c != w[1] * groups)
    return error{"args: aten::conv2d of " + describe(0, in[0]) + " with weight " + describe(1, in[1]) +
                 ": the input has " + std::to_string(c) + " channels, the weight expects " + std::to_string(w[1]) +
                 " x groups " + std::to_string(groups) + " = " + std::to_string(w[1] * groups)};
  if (w[0] % groups != 0)
    return error{"args[1]: out_channels " + std::to_string(w[0]) + " is not divisible by groups " +
                 std::to_string(groups)};
  if (in.size() == 3 && in[2].info.shape != std::vector<int64_t>{w[0]})
    return error{"args[2]: the bias of aten::conv2d must be [" + std::to_string(w[0]) + "], '" + in[2].name + "' is " +
                 shape_to_string(in[2].info.shape)};
  std::vector<int64_t> out;
  if (batched) out.push_back(x[0]);
  out.push_back(w[0]);
  for (int i = 0; i < 2; ++i) {
    int64_t size = x[x.size() - 2 + i];
    int64_t o = same ? size : (size + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) / stride[i] + 1;
    if (o < 1)
      return error{"args: aten::conv2d of " + describe(0, in[0]) + " with weight " + describe(1, in[1]) +
                   ": the output would be empty (spatial size " + std::to_string(o) + ")"};
    out.push_back(o);
  }
  if (nhwc) out = {out[0], out[2], out[3], out[1]};
  std::string dtype = promote(in[0].info.dtype, in[1].info.dtype);
  if (in.size() == 3) dtype = promote(dtype, in[2].info.dtype);
  return tensor_info{out, dtype};
}

result<tensor_info> infer_binary(const std::string& op, const std::vector<lib_input>& in, const attrs_t& attrs) {
  if (auto s = number_attr(attrs, "alpha"); !s.ok()) return error{s.message()};
  if (auto it = attrs.find("rounding_mode"); it != attrs.end() && it->second != "trunc" && it->second != "floor")
    return error{"attrs.rounding_mode: expected \"trunc\" or \"floor\", got " + in_quotes(it->second)};
  std::vector<int64_t> shape = in[0].info.shape;
  std::string dtype = in[0].info.dtype;
  if (in[1].is_tensor) {
    auto b = broadcast(in[0].info.shape, in[1].info.shape, "args");
    if (!b.ok()) return b.error();
    shape = b.value();
    dtype = promote(dtype, in[1].info.dtype);
  } else if (in[1].scalar_float && !is_float_dtype(dtype)) {
    dtype = "float32";
  }
  if (op == "aten::div" && !attrs.count("rounding_mode") && !is_float_dtype(dtype)) dtype = "float32";
  return tensor_info{shape, dtype};
}

result<tensor_info> infer_unary(const std::string& op, const std::vector<lib_input>& in, const attrs_t& attrs) {
  std::string dtype = in[0].info.dtype;
  bool keeps_int = op == "aten::relu" || op == "aten::neg" || op == "aten::abs";
  if (!keeps_int && !is_float_dtype(dtype)) dtype = "float32";
  if (auto it = attrs.find("approximate"); it != attrs.end() && it->second != "none" && it->second != "tanh")
    return error{"attrs.approximate: expected \"none\" or \"tanh\", got " + in_quotes(it->second)};
  if (op == "aten::softmax" || op == "aten::log_softmax") {
    auto it = attrs.find("dim");
    if (it == attrs.end()) return error{"attrs: " + op + " needs the attribute dim"};
    auto d = parse_int_list(it->second, 1, "attrs.dim");
    if (!d.ok()) return d.error();
    int64_t nd = static_cast<int64_t>(in[0].info.shape.size());
    int64_t dim = d.value()[0];
    if (dim < -std::max<int64_t>(nd, 1) || dim >= std::max<int64_t>(nd, 1))
      return error{"attrs.dim: " + std::to_string(dim) + " is out of range for '" + in[0].name + "' " +
                   shape_to_string(in[0].info.shape)};
  }
  return tensor_info{in[0].info.shape, dtype};
}

const std::map<std::string, known_op>& known_ops() {
  static const std::map<std::string, known_op> ops = [] {
    constexpr size_t tensors_only = SIZE_MAX;
    std::map<std::string, known_op> m = {
        // math: "ieee" or "tf32" (cuBLAS may use TF32 for this call: gpu/matmul_precision.hpp)
        {"aten::matmul", {2, 2, {"math"}, tensors_only, infer_matmul}},
        {"aten::mm", {2, 2, {"math"}, tensors_only, infer_matmul}},
        {"aten::bmm", {2, 2, {"math"}, tensors_only, infer_matmul}},
        {"aten::addmm", {3, 3, {"beta", "alpha", "math"}, tensors_only, infer_addmm}},
        {"aten::linear", {2, 3, {"math"}, tensors_only, infer_linear}},
        {"aten::conv2d",
         {2,
          3,
          {"stride", "padding", "dilation", "groups", "memory_format", "result_layout"},
          tensors_only,
          infer_conv2d}},
        {"aten::add", {2, 2, {"alpha"}, 1, infer_binary}},
        {"aten::sub", {2, 2, {"alpha"}, 1, infer_binary}},
        {"aten::mul", {2, 2, {}, 1, infer_binary}},
        {"aten::div", {2, 2, {"rounding_mode"}, 1, infer_binary}},
        {"aten::softmax", {1, 1, {"dim"}, tensors_only, infer_unary}},
        {"aten::log_softmax", {1, 1, {"dim"}, tensors_only, infer_unary}},
        {"aten::gelu", {1, 1, {"approximate"}, tensors_only, infer_unary}},
    };
    for (const char* u : {"relu", "sigmoid", "tanh", "exp", "log", "neg", "abs", "sqrt", "rsqrt", "silu", "sin", "cos"})
      m[std::string("aten::") + u] = {1, 1, {}, tensors_only, infer_unary};
    return m;
  }();
  return ops;
}

// ---------------------------------------------------------------------------
// The resolver

struct tensor_state {
  buffer_role role = buffer_role::input;
  tensor_info info;
  bool known = true;   // shape and dtype known before the plan runs
  std::string origin;  // "outputs[0]", "scratch[1]", "step 2 (library aten::foo)"
  std::string init = "none";
};

class resolver {
 public:
  resolver(const launch_plan& plan, const plan_context& ctx) : plan_(plan), ctx_(ctx) {}

  status run() {
    if (auto s = inputs(); !s.ok()) return s;
    if (auto s = constants(); !s.ok()) return s;
    if (auto s = buffers(); !s.ok()) return s;
    for (size_t i = 0; i < plan_.steps.size(); ++i)
      if (auto s = step(i, plan_.steps[i]); !s.ok()) return s;
    return finish();
  }

  resolved_plan out;

 private:
  // -- inputs, constants, buffers ------------------------------------------

  status inputs() {
    for (auto& [name, info] : ctx_.inputs) {
      if (!is_plan_dtype(info.dtype)) return error{"input '" + name + "': unknown dtype '" + info.dtype + "'"};
      for (int64_t d : info.shape)
        if (d < 0) return error{"input '" + name + "': negative dimension in " + shape_to_string(info.shape)};
      tensors_[name] = tensor_state{buffer_role::input, info, true, "input", "none"};
      env_.tensors[name] = info.shape;
      defined_.insert(name);
    }
    return {};
  }

  status constants() {
    for (auto& [name, text] : plan_.constants) {
      if (!is_identifier(name))
        return error{"constants." + name + ": '" + name +
                     "' is not a valid name (letters, digits and _, not starting with a digit)"};
      if (tensors_.count(name))
        return error{"constants." + name + ": '" + name + "' is also the name of an input tensor; rename the constant"};
      auto e = shape_expr::parse(text);
      if (!e.ok()) return error{"constants." + name + ": " + e.message()};
      parsed_constants_.emplace(name, e.value());
    }
    for (auto& [name, e] : parsed_constants_) {
      std::vector<std::string> chain;
      if (auto s = constant(name, chain); !s.ok()) return s;
    }
    out.constants = env_.constants;
    return {};
  }

  // Evaluates `name` after the constants it reads; `chain` detects cycles.
  status constant(const std::string& name, std::vector<std::string>& chain) {
    if (env_.constants.count(name)) return {};
    if (std::find(chain.begin(), chain.end(), name) != chain.end()) {
      std::string cycle;
      auto start = std::find(chain.begin(), chain.end(), name);
      for (auto it = start; it != chain.end(); ++it) cycle += *it + " -> ";
      return error{"constants." + name + ": the constants depend on each other in a cycle: " + cycle + name};
    }
    const shape_expr& e = parsed_constants_.at(name);
    chain.push_back(name);
    for (auto& dep : e.constant_names())
      if (parsed_constants_.count(dep))
        if (auto s = constant(dep, chain); !s.ok()) return s;
    chain.pop_back();
    auto v = e.eval(env_);
    if (!v.ok()) return error{"constants." + name + ": " + v.message()};
    env_.constants[name] = v.value();
    return {};
  }

  status buffers() {
    if (plan_.outputs.empty())
      return error{"outputs: the plan declares no outputs; list the tensors it returns, in the reference's order"};
    for (auto [list, role, key] : {std::tuple{&plan_.outputs, buffer_role::output, "outputs"},
                                   std::tuple{&plan_.scratch, buffer_role::scratch, "scratch"}}) {
      for (size_t i = 0; i < list->size(); ++i) {
        const buffer_spec& b = (*list)[i];
        std::string field = std::string(key) + "[" + std::to_string(i) + "]";
        std::string prefix = field + " '" + b.name + "': ";
        if (!is_identifier(b.name))
          return error{field + ": '" + b.name +
                       "' is not a valid name (letters, digits and _, not starting with a digit)"};
        if (auto t = tensors_.find(b.name); t != tensors_.end()) {
          if (t->second.role == buffer_role::input)
            return error{prefix + "shadows the input '" + b.name + "'; give the buffer another name"};
          return error{prefix + "duplicate name: " + t->second.origin + " is also '" + b.name + "'"};
        }
        if (parsed_constants_.count(b.name))
          return error{prefix + "'" + b.name + "' is also a constant; give the buffer another name"};
        if (!is_plan_dtype(b.dtype))
          return error{prefix + "dtype: unknown dtype '" + b.dtype + "'; expected one of: " + join(plan_dtypes())};
        if (b.init != "none" && b.init != "zeros")
          return error{prefix + "init: expected 'none' or 'zeros', got '" + b.init + "'"};
        resolved_buffer rb{b.name, role, {}, true, b.dtype, b.init};
        for (size_t d = 0; d < b.shape.size(); ++d) {
          auto v = integer(b.shape[d], prefix + "shape[" + std::to_string(d) + "]");
          if (!v.ok()) return v.error();
          if (v.value() < 0)
            return error{prefix + "shape[" + std::to_string(d) + "]: " + in_quotes(b.shape[d]) + " is " +
                         std::to_string(v.value()) + "; a dimension cannot be negative"};
          rb.shape.push_back(v.value());
        }
        int64_t bytes = dtype_size(b.dtype);
        for (int64_t d : rb.shape)
          if (__builtin_mul_overflow(bytes, d, &bytes))
            return error{prefix + "shape " + shape_to_string(rb.shape) + " is too large"};
        tensors_[b.name] = tensor_state{role, {rb.shape, b.dtype}, true, field, b.init};
        env_.tensors[b.name] = rb.shape;
        if (b.init == "zeros") defined_.insert(b.name);
        (role == buffer_role::output ? out.outputs : out.scratch).push_back(rb);
      }
    }
    size_t n = plan_.outputs.size();
    if (!ctx_.reference_outputs.empty() || ctx_.expected_outputs) {
      size_t want = ctx_.reference_outputs.empty() ? *ctx_.expected_outputs : ctx_.reference_outputs.size();
      if (n != want)
        return error{"outputs: the plan declares " + std::to_string(n) + (n == 1 ? " output" : " outputs") +
                     ", the reference returns " + std::to_string(want)};
    }
    for (size_t i = 0; i < ctx_.reference_outputs.size(); ++i) {
      const resolved_buffer& b = out.outputs[i];
      const tensor_info& r = ctx_.reference_outputs[i];
      std::string prefix = "outputs[" + std::to_string(i) + "] '" + b.name + "': ";
      if (b.shape != r.shape)
        return error{prefix + "shape " + shape_to_string(b.shape) + " does not match the reference's output " +
                     std::to_string(i) + " " + shape_to_string(r.shape)};
      if (b.dtype != r.dtype)
        return error{prefix + "dtype " + b.dtype + " does not match the reference's output " + std::to_string(i) +
                     " (" + r.dtype + ")"};
    }
    return {};
  }

  // -- expressions -------------------------------------------------------------

  result<expr_value> value(const std::string& text, const std::string& field) {
    auto e = shape_expr::parse(text);
    if (!e.ok()) return error{field + ": " + e.message()};
    auto v = e->eval(env_);
    if (!v.ok()) return error{field + ": " + v.message()};
    return v;
  }

  result<int64_t> integer(const std::string& text, const std::string& field) {
    auto v = value(text, field);
    if (!v.ok()) return v.error();
    if (v->is_float)
      return error{field + ": " + in_quotes(text) + " is " + v->to_string() +
                   ", not an integer (use floor(), ceil() or integer arithmetic)"};
    return v->i;
  }

  // -- steps -------------------------------------------------------------------

  static std::string param_text(size_t j, const kernel_param& p) {
    return "parameter " + std::to_string(j) + (p.name.empty() ? "" : " '" + p.name + "'") + " (" + p.type + ")";
  }

  std::vector<std::string> tensor_names() const {
    std::vector<std::string> v;
    for (auto& [k, t] : tensors_) v.push_back(k);
    return v;
  }

  // The tensor read or written by `field`; checks that it exists.
  result<const tensor_state*> tensor(const std::string& name, const std::string& field) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      auto names = tensor_names();
      return error{field + ": unknown tensor '" + name + "'" + did_you_mean(name, names) +
                   "; tensors at this step: " + join(names)};
    }
    return &it->second;
  }

  // A tensor that a step reads must hold data by then.
  status check_defined(const std::string& name, const tensor_state& t, const std::string& field,
                       const std::string& how) {
    if (defined_.count(name)) return {};
    std::string what = t.role == buffer_role::output
                           ? "it is an output with init: none (outputs are poisoned before the plan runs)"
                           : "it is scratch with init: none";
    return error{field + ": '" + name + "' is read" + how + " before any step writes it; " + what +
                 " — write it in an earlier step or declare it with init: zeros"};
  }

  result<int64_t> dim(const std::string& label, const std::vector<std::string>& exprs, const char* what, size_t d,
                      int64_t limit, std::array<int64_t, 3>& into) {
    std::string field = label + ": " + what + "[" + std::to_string(d) + "]";
    auto v = integer(exprs[d], field);
    if (!v.ok()) return v.error();
    if (v.value() < 1)
      return error{field + ": " + in_quotes(exprs[d]) + " is " + std::to_string(v.value()) +
                   "; a launch dimension must be at least 1"};
    if (v.value() > limit)
      return error{field + ": " + in_quotes(exprs[d]) + " is " + std::to_string(v.value()) +
                   ", above the device limit of " + std::to_string(limit)};
    into[d] = v.value();
    return v;
  }

  status kernel_step(size_t index, const plan_step& s, resolved_step& rs) {
    const std::string label = rs.label();
    const kernel_signature* sig = find_kernel(ctx_.kernels, s.name);
    if (!sig) {
      std::vector<std::string> names;
      for (auto& k : ctx_.kernels) names.push_back(k.name);
      if (names.empty())
        return error{label + ": kernel: the source defines no __global__ function named '" + s.name +
                     "' (it defines none at all)"};
      return error{label + ": kernel: '" + s.name + "' is not a __global__ function of the source" +
                   did_you_mean(s.name, names) + "; kernels found: " + join(names)};
    }
    if (!sig->launchable)
      return error{label + ": kernel: '" + s.name + "' (line " + std::to_string(sig->line) +
                   ") cannot be launched by name: " + sig->not_launchable_reason};
    for (auto [exprs, what] : {std::pair{&s.grid, "grid"}, std::pair{&s.block, "block"}})
      if (exprs->empty() || exprs->size() > 3)
        return error{label + ": " + what + ": expected 1 to 3 expressions (x, y, z), got " +
                     std::to_string(exprs->size())};
    for (size_t d = 0; d < s.grid.size(); ++d)
      if (auto v = dim(label, s.grid, "grid", d, ctx_.limits.max_grid_dims[d], rs.grid); !v.ok()) return v.error();
    for (size_t d = 0; d < s.block.size(); ++d)
      if (auto v = dim(label, s.block, "block", d, ctx_.limits.max_block_dims[d], rs.block); !v.ok()) return v.error();
    int64_t threads = rs.block[0] * rs.block[1] * rs.block[2];
    std::string block_text =
        std::to_string(rs.block[0]) + " x " + std::to_string(rs.block[1]) + " x " + std::to_string(rs.block[2]);
    if (threads > ctx_.limits.max_threads_per_block)
      return error{label + ": block: " + block_text + " = " + std::to_string(threads) +
                   " threads, above the device limit of " + std::to_string(ctx_.limits.max_threads_per_block) +
                   " per block"};
    if (sig->launch_bounds > 0 && threads > sig->launch_bounds)
      return error{label + ": block: " + std::to_string(threads) + " threads, above the kernel's __launch_bounds__(" +
                   std::to_string(sig->launch_bounds) + ")"};
    if (threads % 32 != 0)
      out.warnings.push_back(label + ": block: " + std::to_string(threads) +
                             " threads is not a multiple of 32 (the warp size); the last warp runs partly idle");
    std::string sm = s.shared_mem.empty() ? "0" : s.shared_mem;
    auto shared = integer(sm, label + ": shared_mem");
    if (!shared.ok()) return shared.error();
    if (shared.value() < 0)
      return error{label + ": shared_mem: " + in_quotes(sm) + " is " + std::to_string(shared.value()) +
                   " bytes; it cannot be negative"};
    if (shared.value() > ctx_.limits.max_shared_mem_bytes)
      return error{label + ": shared_mem: " + in_quotes(sm) + " is " + std::to_string(shared.value()) +
                   " bytes, above the device limit of " + std::to_string(ctx_.limits.max_shared_mem_bytes) +
                   " bytes of dynamic shared memory per block"};
    rs.shared_mem_bytes = shared.value();

    if (s.args.size() != sig->params.size())
      return error{label + ": args: " + std::to_string(s.args.size()) + " given, but " + s.name + " takes " +
                   std::to_string(sig->params.size()) + " (" + sig->params_text() + ")"};
    std::vector<std::string> written;
    for (size_t j = 0; j < s.args.size(); ++j) {
      const plan_arg& a = s.args[j];
      const kernel_param& p = sig->params[j];
      std::string field = label + ": args[" + std::to_string(j) + "]";
      resolved_arg ra;
      ra.kind = a.kind;
      if (a.kind == "tensor") {
        if (!p.is_pointer)
          return error{field + ": tensor '" + a.value + "' passed to " + param_text(j, p) +
                       ", which takes a number; write {" +
                       (dtype_of(p.kind).empty() ? std::string("int64") : dtype_of(p.kind)) + ": EXPRESSION}"};
        auto t = tensor(a.value, field);
        if (!t.ok()) return t.error();
        const tensor_state& ts = *t.value();
        std::string want = dtype_of(p.kind);
        if (!want.empty() && ts.known && ts.info.dtype != want)
          return error{field + ": tensor '" + a.value + "' is " + ts.info.dtype + ", but " + param_text(j, p) +
                       " points to " + want};
        if (p.pointee_const) {
          if (auto st = check_defined(a.value, ts, field, " (by " + param_text(j, p) + ")"); !st.ok()) return st;
        } else {
          rs.writes.push_back(a.value);
          if (ts.role == buffer_role::input)
            out.warnings.push_back(
                field + ": input '" + a.value + "' is passed to non-const " + param_text(j, p) +
                "; the kernel may modify an input, which fails verification — declare the parameter const");
          else
            written.push_back(a.value);
        }
        ra.tensor = a.value;
      } else if (a.kind == "int" || a.kind == "float") {
        if (p.is_pointer)
          return error{field + ": a number passed to " + param_text(j, p) +
                       ", which takes a tensor; pass a tensor name"};
        std::string want = dtype_of(p.kind);
        if (want.empty() || want == "float16" || want == "bfloat16" || want == "bool")
          return error{field + ": " + param_text(j, p) +
                       " has a type a plan cannot pass; kernel scalars must be int32, int64, float32 or float64 (int, "
                       "long, float, double)"};
        if (auto s2 = scalar_arg(a, field, want, p, j, ra); !s2.ok()) return s2;
      } else {
        return error{field + ": unknown argument kind '" + a.kind + "' (expected tensor, int or float)"};
      }
      rs.args.push_back(ra);
    }
    for (auto& w : written) {
      defined_.insert(w);
      written_.insert(w);
    }
    (void)index;
    return {};
  }

  // A typed scalar argument. `want` is the parameter's type ("" for library steps).
  status scalar_arg(const plan_arg& a, const std::string& field, const std::string& want, const kernel_param& p,
                    size_t j, resolved_arg& ra) {
    static const std::set<std::string> types = {"int32", "int64", "float32", "float64"};
    if (!types.count(a.type))
      return error{field + ": unknown scalar type '" + a.type + "' (expected int32, int64, float32 or float64)"};
    bool int_type = a.type == "int32" || a.type == "int64";
    if ((a.kind == "int") != int_type)
      return error{field + ": kind '" + a.kind + "' does not match type '" + a.type + "'"};
    if (!want.empty() && a.type != want)
      return error{field + ": " + a.type + " value passed to " + param_text(j, p) + "; write {" + want + ": " +
                   a.value + "}"};
    auto v = value(a.value, field);
    if (!v.ok()) return v.error();
    ra.type = a.type;
    if (int_type) {
      if (v->is_float)
        return error{field + ": " + in_quotes(a.value) + " is " + v->to_string() + ", not an integer, but the " +
                     a.type + " argument needs one (use floor(), ceil() or {float32: ...})"};
      int64_t x = v->i;
      if (p.is_unsigned && x < 0)
        return error{field + ": " + in_quotes(a.value) + " is " + std::to_string(x) + ", but " + param_text(j, p) +
                     " is unsigned"};
      if (a.type == "int32") {
        int64_t lo = p.is_unsigned ? 0 : INT32_MIN;
        int64_t hi = p.is_unsigned ? int64_t{UINT32_MAX} : INT32_MAX;
        if (x < lo || x > hi)
          return error{field + ": " + in_quotes(a.value) + " is " + std::to_string(x) +
                       ", which does not fit in int32; use an int64 parameter and {int64: ...}"};
      }
      ra.int_value = x;
    } else {
      double x = v->as_double();
      if (a.type == "float32" && std::fabs(x) > FLT_MAX)
        return error{field + ": " + in_quotes(a.value) + " is " + v->to_string() + ", which does not fit in float32"};
      ra.float_value = x;
    }
    return {};
  }

  status library_step(size_t index, const plan_step& s, resolved_step& rs) {
    const std::string label = rs.label();
    if (s.name.rfind("aten::", 0) != 0 || s.name.size() == 6)
      return error{label + ": library: '" + s.name +
                   "' is not an ATen op; library steps run aten::NAME ops through LibTorch"};
    if (!s.grid.empty() || !s.block.empty())
      return error{label + ": " + (s.grid.empty() ? "block" : "grid") + ": library steps take no launch configuration"};
    if (!s.shared_mem.empty() && s.shared_mem != "0")
      return error{label + ": shared_mem: library steps take no shared memory"};
    std::string op = s.name.substr(0, s.name.find('.'));  // aten::add.Tensor → aten::add
    auto known_it = known_ops().find(op);
    const known_op* known = known_it == known_ops().end() ? nullptr : &known_it->second;
    // A dispatcher step (attrs.schema): that overload exactly, its non-tensor arguments
    // as attributes named as in the schema; result shapes unknown here.
    if (auto sc = s.attrs.find("schema"); sc != s.attrs.end()) {
      known = nullptr;
      auto schema = parse_op_schema(sc->second);
      if (!schema) return error{label + ": attrs.schema: " + schema.message()};
      if (schema->qualified() != s.name && schema->name != s.name)
        return error{label + ": attrs.schema names " + schema->qualified() + ", but the step runs " + s.name};
      std::vector<std::string> arg_names;
      for (auto& a : schema->args) arg_names.push_back(a.name);
      for (auto& [k, v] : s.attrs)
        if (k != "schema" && k != "run_layout" && !schema->find(k))
          return error{label + ": attrs." + k + ": " + schema->qualified() + " has no argument '" + k + "'" +
                       did_you_mean(k, arg_names) + "; its arguments: " + join(arg_names)};
      // run_layout: how the step runs its op (gpu/dispatch_runtime.hpp), not an argument.
      if (auto rl = s.attrs.find("run_layout"); rl != s.attrs.end() && trim_blanks(rl->second) != "channels_last")
        return error{label + ": attrs.run_layout: expected channels_last, got \"" + rl->second + "\""};
      if (s.outputs.size() > schema->returns.size())
        return error{label + ": outputs: " + schema->qualified() + " returns " +
                     std::to_string(schema->returns.size()) + " value(s), " + std::to_string(s.outputs.size()) +
                     " names given"};
    }

    std::vector<lib_input> inputs;
    bool all_known = true;
    for (size_t j = 0; j < s.args.size(); ++j) {
      const plan_arg& a = s.args[j];
      std::string field = label + ": args[" + std::to_string(j) + "]";
      resolved_arg ra;
      ra.kind = a.kind;
      lib_input in;
      if (a.kind == "tensor") {
        auto t = tensor(a.value, field);
        if (!t.ok()) return t.error();
        if (auto st = check_defined(a.value, *t.value(), field, ""); !st.ok()) return st;
        ra.tensor = a.value;
        in = {a.value, true, t.value()->known, t.value()->info, false};
        all_known = all_known && in.known;
      } else if (a.kind == "int" || a.kind == "float") {
        if (known && j < known->scalar_from)
          return error{field + ": " + op + " takes a tensor here, got the number " + in_quotes(a.value)};
        kernel_param any;
        if (auto st = scalar_arg(a, field, "", any, j, ra); !st.ok()) return st;
        in = {a.value, false, true, {}, a.kind == "float"};
      } else {
        return error{field + ": unknown argument kind '" + a.kind + "' (expected tensor, int or float)"};
      }
      inputs.push_back(in);
      rs.args.push_back(ra);
    }
    if (s.outputs.empty()) return error{label + ": outputs: a library step must name the tensor(s) it produces"};

    tensor_info inferred;
    bool inferred_known = false;
    if (known) {
      for (auto& [k, v] : s.attrs)
        if (std::find(known->attrs.begin(), known->attrs.end(), k) == known->attrs.end())
          return error{label + ": attrs." + k + ": " + op + " has no attribute '" + k + "'" +
                       (known->attrs.empty()
                            ? std::string(" (it takes none)")
                            : did_you_mean(k, known->attrs) + "; its attributes: " + join(known->attrs))};
      if (auto it = s.attrs.find("math"); it != s.attrs.end() && it->second != "ieee" && it->second != "tf32")
        return error{label + ": attrs.math: expected ieee or tf32, got \"" + it->second + "\""};
      if (inputs.size() < known->min_args || inputs.size() > known->max_args) {
        std::string range = known->min_args == known->max_args
                                ? std::to_string(known->min_args)
                                : std::to_string(known->min_args) + " or " + std::to_string(known->max_args);
        return error{label + ": args: " + op + " takes " + range + " arguments, got " + std::to_string(inputs.size())};
      }
      if (s.outputs.size() != 1)
        return error{label + ": outputs: " + op + " returns one tensor, " + std::to_string(s.outputs.size()) +
                     " names given"};
      if (all_known) {
        auto r = known->infer(op, inputs, s.attrs);
        if (!r.ok()) return error{label + ": " + r.message()};
        inferred = r.value();
        inferred_known = true;
      }
    }

    std::set<std::string> names;
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      const std::string& name = s.outputs[k];
      std::string field = label + ": outputs[" + std::to_string(k) + "] '" + name + "'";
      if (!is_identifier(name))
        return error{field + ": not a valid name (letters, digits and _, not starting with a digit)"};
      if (!names.insert(name).second) return error{field + ": named twice in this step's outputs"};
      if (parsed_constants_.count(name))
        return error{field + ": '" + name + "' is a constant; give the result another name"};
      auto it = tensors_.find(name);
      if (it != tensors_.end()) {
        tensor_state& t = it->second;
        if (t.role == buffer_role::input)
          return error{field + ": is an input; a library step may not overwrite inputs"};
        if (t.role == buffer_role::intermediate)
          return error{field + ": already produced by " + t.origin +
                       "; give this result a new name, or declare it as scratch to reuse it"};
        if (inferred_known && t.info.shape != inferred.shape)
          return error{field + ": shape " + shape_to_string(t.info.shape) + " does not match the op's result " +
                       shape_to_string(inferred.shape)};
        if (inferred_known && !inferred.dtype.empty() && t.info.dtype != inferred.dtype)
          return error{field + ": dtype " + t.info.dtype + " does not match the op's result (" + inferred.dtype + ")"};
        defined_.insert(name);
        written_.insert(name);
      } else {
        tensor_state t;
        t.role = buffer_role::intermediate;
        t.origin = label;
        t.known = inferred_known;
        resolved_buffer rb{name, buffer_role::intermediate, {}, inferred_known, "", ""};
        if (inferred_known) {
          t.info = inferred;
          rb.shape = inferred.shape;
          rb.dtype = inferred.dtype;
          env_.tensors[name] = inferred.shape;
        } else {
          t.info = {{}, ""};
          std::string why =
              known ? "an input of " + op + " has an unknown shape" : op + " has no shape inference in plan/";
          env_.unknown_shape_tensors[name] =
              "it is the result of " + label + ", and " + why + "; declare it as scratch to give it a shape";
        }
        tensors_[name] = t;
        defined_.insert(name);
        out.intermediates.push_back(rb);
      }
      rs.outputs.push_back(name);
      rs.writes.push_back(name);
    }
    rs.attrs = s.attrs;
    (void)index;
    return {};
  }

  status step(size_t index, const plan_step& s) {
    resolved_step rs;
    rs.index = index;
    rs.kind = s.kind;
    rs.name = s.name;
    if (s.kind != "kernel" && s.kind != "library")
      return error{"step " + std::to_string(index) + ": kind '" + s.kind + "' is neither kernel nor library"};
    if (s.kind == "kernel" && !s.outputs.empty())
      return error{rs.label() +
                   ": outputs: kernel steps write through their pointer arguments; outputs is only for library steps"};
    if (s.kind == "kernel" && !s.attrs.empty())
      return error{rs.label() + ": attrs: only library steps take attributes"};
    for (auto& a : s.args)
      if (a.kind == "tensor") used_.insert(a.value);
    status st = s.kind == "kernel" ? kernel_step(index, s, rs) : library_step(index, s, rs);
    if (!st.ok()) return st;
    out.steps.push_back(std::move(rs));
    return {};
  }

  status finish() {
    for (size_t i = 0; i < plan_.outputs.size(); ++i) {
      const std::string& name = plan_.outputs[i].name;
      if (!written_.count(name))
        return error{"outputs[" + std::to_string(i) + "] '" + name +
                     "': never written by any step (a kernel writes the tensors passed to its non-const "
                     "pointer parameters; a library step writes its outputs)"};
    }
    for (size_t i = 0; i < plan_.scratch.size(); ++i)
      if (!used_.count(plan_.scratch[i].name))
        out.warnings.push_back("scratch[" + std::to_string(i) + "] '" + plan_.scratch[i].name +
                               "': never used by any step");
    return {};
  }

  const launch_plan& plan_;
  const plan_context& ctx_;
  expr_env env_;
  std::map<std::string, shape_expr> parsed_constants_;
  std::map<std::string, tensor_state> tensors_;
  std::set<std::string> defined_;  // hold data: inputs, zero-initialised or written buffers
  std::set<std::string> written_;  // written by some step
  std::set<std::string> used_;     // passed to some step
};

}  // namespace

result_target target_of(bool declared, bool scratch, bool touched_by_kernel) {
  if (!declared) return touched_by_kernel ? result_target::kernel_intermediate : result_target::library_intermediate;
  return scratch && !touched_by_kernel ? result_target::library_scratch : result_target::buffer;
}

result<resolved_plan> resolve_plan(const launch_plan& plan, const plan_context& context) {
  resolver r(plan, context);
  if (auto s = r.run(); !s.ok()) return error{s.message()};
  return std::move(r.out);
}

}  // namespace ks
