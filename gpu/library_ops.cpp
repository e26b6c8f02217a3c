#include "gpu/library_ops.hpp"

#include <functional>
#include <optional>

#include <ATen/Functions.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "gpu/dispatch_runtime.hpp"
#include "gpu/matmul_precision.hpp"
#include "plan/attr_parse.hpp"

namespace ks {

namespace {

using attrs_t = std::map<std::string, std::string>;
using args_t = std::vector<library_arg>;

// Thrown by the parsers below and caught in run_library_op: a message for the plan's
// author.
struct op_error {
  std::string message;
};

// An integer, or a list of n integers ("2", "[1, 2]", "(1, 2)"); one value is repeated.
std::vector<int64_t> int_list(const attrs_t& attrs, const std::string& key, size_t n, std::vector<int64_t> fallback) {
  auto v = int_list_attr(attrs, key, n, std::move(fallback));
  if (!v) throw op_error{v.message()};
  return std::move(v).value();
}

int64_t int_attr(const attrs_t& attrs, const std::string& key, std::optional<int64_t> fallback) {
  auto it = attrs.find(key);
  if (it == attrs.end()) {
    if (!fallback) throw op_error{"attrs: this op needs the attribute " + key};
    return *fallback;
  }
  return int_list(attrs, key, 1, {})[0];
}

// A number attribute as a Scalar: an integer when it reads as one (so that integer
// tensors accept it), else a double.
at::Scalar scalar_attr(const attrs_t& attrs, const std::string& key, double fallback) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return at::Scalar(fallback);
  int64_t i = 0;
  if (parse_int(it->second, i)) return at::Scalar(i);
  double d = 0;
  if (parse_double(it->second, d)) return at::Scalar(d);
  throw op_error{"attrs." + key + ": expected a number, got \"" + it->second + "\""};
}

std::string string_attr(const attrs_t& attrs, const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& allowed) {
  auto v = choice_attr(attrs, key, fallback, allowed);
  if (!v) throw op_error{v.message()};
  return std::move(v).value();
}

const at::Tensor& tensor_arg(const args_t& args, size_t i) {
  if (i >= args.size() || !args[i].is_tensor()) throw op_error{"args[" + std::to_string(i) + "]: expected a tensor"};
  return args[i].tensor;
}

at::Scalar number_of(const library_arg& a) { return a.is_float ? at::Scalar(a.float_value) : at::Scalar(a.int_value); }

struct op_entry {
  size_t min_args, max_args;
  std::function<at::Tensor(const args_t&, const attrs_t&)> run;
};

at::Tensor binary(const std::string& op, const args_t& a, const attrs_t& attrs) {
  const at::Tensor& x = tensor_arg(a, 0);
  if (op == "aten::add" || op == "aten::sub") {
    at::Scalar alpha = attrs.count("alpha") ? scalar_attr(attrs, "alpha", 1.0) : at::Scalar(int64_t{1});
    bool add = op == "aten::add";
    if (a[1].is_tensor()) return add ? at::add(x, a[1].tensor, alpha) : at::sub(x, a[1].tensor, alpha);
    return add ? at::add(x, number_of(a[1]), alpha) : at::sub(x, number_of(a[1]), alpha);
  }
  if (op == "aten::mul") return a[1].is_tensor() ? at::mul(x, a[1].tensor) : at::mul(x, number_of(a[1]));
  // aten::div
  if (attrs.count("rounding_mode")) {
    std::string mode = string_attr(attrs, "rounding_mode", "", {"trunc", "floor"});
    c10::string_view m(mode.c_str());
    return a[1].is_tensor() ? at::div(x, a[1].tensor, m) : at::div(x, number_of(a[1]), m);
  }
  return a[1].is_tensor() ? at::div(x, a[1].tensor) : at::div(x, number_of(a[1]));
}

// A product's attrs.math: "ieee" (ATen's own setting, the default) or "tf32" (cuBLAS
// may use TF32 tensor cores for this call: the operands of a split-precision GEMM,
// gpu/matmul_precision.hpp).
template <class F>
at::Tensor product(const attrs_t& attrs, F&& f) {
  const std::string math = string_attr(attrs, "math", "ieee", {"ieee", "tf32"});
  return math == "tf32" ? matmul_precision::with_tf32(f) : f();
}

const std::map<std::string, op_entry>& table() {
  static const std::map<std::string, op_entry> t = [] {
    std::map<std::string, op_entry> m;
    m["aten::matmul"] = {2, 2, [](const args_t& a, const attrs_t& at_) {
                           return product(at_, [&] { return at::matmul(tensor_arg(a, 0), tensor_arg(a, 1)); });
                         }};
    m["aten::mm"] = {2, 2, [](const args_t& a, const attrs_t& at_) {
                       return product(at_, [&] { return at::mm(tensor_arg(a, 0), tensor_arg(a, 1)); });
                     }};
    m["aten::bmm"] = {2, 2, [](const args_t& a, const attrs_t& at_) {
                        return product(at_, [&] { return at::bmm(tensor_arg(a, 0), tensor_arg(a, 1)); });
                      }};
    m["aten::addmm"] = {3, 3, [](const args_t& a, const attrs_t& at_) {
                          return product(at_, [&] {
                            return at::addmm(tensor_arg(a, 0), tensor_arg(a, 1), tensor_arg(a, 2),
                                             scalar_attr(at_, "beta", 1.0), scalar_attr(at_, "alpha", 1.0));
                          });
                        }};
    m["aten::linear"] = {2, 3, [](const args_t& a, const attrs_t& at_) {
                           at::Tensor bias = a.size() > 2 ? tensor_arg(a, 2) : at::Tensor();
                           return product(at_, [&] { return at::linear(tensor_arg(a, 0), tensor_arg(a, 1), bias); });
                         }};
    m["aten::conv2d"] = {
        2, 3, [](const args_t& a, const attrs_t& at_) {
          at::Tensor bias = a.size() > 2 ? tensor_arg(a, 2) : at::Tensor();
          // memory_format channels_last: cuDNN computes in NHWC (input and
          // weight converted first), as torch.compile chooses.
          auto in = [&](size_t k) {
            auto mf = at_.find("memory_format");
            return mf != at_.end() && trim_blanks(mf->second) == "channels_last"
                       ? tensor_arg(a, k).contiguous(at::MemoryFormat::ChannelsLast)
                       : tensor_arg(a, k);
          };
          auto stride = int_list(at_, "stride", 2, {1, 1});
          auto dilation = int_list(at_, "dilation", 2, {1, 1});
          int64_t groups = int_attr(at_, "groups", 1);
          auto pad = at_.find("padding");
          at::Tensor y;
          if (pad != at_.end() && (trim_blanks(pad->second) == "same" || trim_blanks(pad->second) == "valid")) {
            std::string mode = trim_blanks(pad->second);
            y = at::conv2d(in(0), in(1), bias, stride, c10::string_view(mode.c_str()), dilation, groups);
          } else {
            y = at::conv2d(in(0), in(1), bias, stride, int_list(at_, "padding", 2, {0, 0}), dilation, groups);
          }
          // result_layout nhwc: handed on as [N, H, W, C], as a channels-last
          // result lies in memory (no copy).
          auto rl = at_.find("result_layout");
          return rl != at_.end() && trim_blanks(rl->second) == "nhwc" ? y.permute({0, 2, 3, 1}) : y;
        }};
    for (const char* op : {"aten::add", "aten::sub", "aten::mul", "aten::div"}) {
      std::string name = op;
      m[name] = {2, 2, [name](const args_t& a, const attrs_t& at_) { return binary(name, a, at_); }};
    }
    m["aten::softmax"] = {1, 1, [](const args_t& a, const attrs_t& at_) {
                            return at::softmax(tensor_arg(a, 0), int_attr(at_, "dim", std::nullopt));
                          }};
    m["aten::log_softmax"] = {1, 1, [](const args_t& a, const attrs_t& at_) {
                                return at::log_softmax(tensor_arg(a, 0), int_attr(at_, "dim", std::nullopt));
                              }};
    m["aten::gelu"] = {1, 1, [](const args_t& a, const attrs_t& at_) {
                         std::string mode = string_attr(at_, "approximate", "none", {"none", "tanh"});
                         return at::gelu(tensor_arg(a, 0), c10::string_view(mode.c_str()));
                       }};
    using unary_fn = at::Tensor (*)(const at::Tensor&);
    const std::pair<const char*, unary_fn> unary[] = {
        {"aten::relu", [](const at::Tensor& x) { return at::relu(x); }},
        {"aten::sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }},
        {"aten::tanh", [](const at::Tensor& x) { return at::tanh(x); }},
        {"aten::exp", [](const at::Tensor& x) { return at::exp(x); }},
        {"aten::log", [](const at::Tensor& x) { return at::log(x); }},
        {"aten::neg", [](const at::Tensor& x) { return at::neg(x); }},
        {"aten::abs", [](const at::Tensor& x) { return at::abs(x); }},
        {"aten::sqrt", [](const at::Tensor& x) { return at::sqrt(x); }},
        {"aten::rsqrt", [](const at::Tensor& x) { return at::rsqrt(x); }},
        {"aten::silu", [](const at::Tensor& x) { return at::silu(x); }},
        {"aten::sin", [](const at::Tensor& x) { return at::sin(x); }},
        {"aten::cos", [](const at::Tensor& x) { return at::cos(x); }},
    };
    for (auto& [name, fn] : unary) {
      unary_fn f = fn;
      m[name] = {1, 1, [f](const args_t& a, const attrs_t&) { return f(tensor_arg(a, 0)); }};
    }
    return m;
  }();
  return t;
}

std::string base_name(std::string_view op) {
  return std::string(op.substr(0, op.find('.')));  // aten::add.Tensor → aten::add
}

// ---------------------------------------------------------------------------------
// Dispatcher steps: any ATen op, by its schema, through gpu/dispatch_runtime.hpp (the
// code an exported module runs them with). Here attributes read as the plan validator
// reads them, and failures are op_errors for the plan's author.

struct reviewer_policy {
  std::string op;  // the step's op, for the results' message

  std::string trim(const std::string& s) const { return trim_blanks(s); }
  bool parse_int(const std::string& text, int64_t& out) const { return ks::parse_int(text, out); }
  bool parse_double(const std::string& text, double& out) const { return ks::parse_double(text, out); }
  bool parse_bool(const std::string& text, bool& out) const { return ks::parse_bool(text, out); }
  std::vector<std::string> list_items(const std::string& text) const { return ks::list_items(text); }

  [[noreturn]] void bad_attribute(const std::string& key, const char* expected, const std::string& text) const {
    throw op_error{"attrs." + key + ": expected " + expected + ", got \"" + text + "\""};
  }
  [[noreturn]] void not_an_attribute(const std::string& key, const c10::TypePtr& type) const {
    throw op_error{"attrs." + key + ": arguments of type " + type->str() + " cannot be given as attributes"};
  }
  [[noreturn]] void missing_positional(const c10::OperatorHandle& h, const std::string& name, int64_t item,
                                       size_t given) const {
    const std::string what = item < 0 ? name : name + "[" + std::to_string(item) + "]";
    throw op_error{"args: " + h.schema().name() + " needs a positional argument for " + what + ", and args has only " +
                   std::to_string(given)};
  }
  [[noreturn]] void no_tensor_count(const std::string& name) const {
    throw op_error{"attrs." + name + ": a tensor list needs \"N tensors\""};
  }
  [[noreturn]] void bad_tensor_count(const std::string& name, const std::string& text) const {
    throw op_error{"attrs." + name + ": expected \"N tensors\", got \"" + text + "\""};
  }
  [[noreturn]] void list_item_not_tensor(const std::string& name, int64_t item) const {
    throw op_error{"args: " + name + "[" + std::to_string(item) + "] must be a tensor"};
  }
  [[noreturn]] void tensor_from_attribute(const std::string& name) const {
    throw op_error{"attrs." + name + ": a tensor argument comes from args (or is None when optional)"};
  }
  [[noreturn]] void not_a_tensor(const std::string& name) const {
    throw op_error{"args: " + name + " must be a tensor"};
  }
  [[noreturn]] void missing_argument(const c10::OperatorHandle& h, const c10::Argument& a) const {
    throw op_error{"attrs: " + h.schema().name() + " needs the argument " + a.name() + " (" + a.type()->str() + ")"};
  }
  [[noreturn]] void unused_arguments(const c10::OperatorHandle& h, size_t given, size_t taken) const {
    throw op_error{"args: " + std::to_string(given) + " given, " + c10::toString(h.schema()) + " takes " +
                   std::to_string(taken) + " of them"};
  }
  [[noreturn]] void result_not_tensor(const c10::OperatorHandle&, size_t k, const c10::IValue& v) const {
    throw op_error{op + ": result " + std::to_string(k) + " is a " + v.tagKind() +
                   "; a library step returns tensors only"};
  }
};

std::vector<dispatch_runtime::arg> positional_of(const args_t& args) {
  std::vector<dispatch_runtime::arg> positional;
  positional.reserve(args.size());
  for (const library_arg& a : args) {
    dispatch_runtime::arg d;
    d.is_tensor = a.is_tensor();
    d.tensor = a.tensor;
    d.is_float = a.is_float;
    d.int_value = a.int_value;
    d.float_value = a.float_value;
    positional.push_back(std::move(d));
  }
  return positional;
}

// The operator of a step with attrs.schema, prepared for arguments of the kinds of args.
dispatch_runtime::prepared_step prepare_by_schema(const reviewer_policy& policy, const args_t& args,
                                                  const attrs_t& attrs) {
  const std::string& op = policy.op;
  const std::string& schema = attrs.at("schema");
  auto h = dispatch_runtime::find_operator(schema, attrs, policy);
  if (!h)
    throw op_error{op + ": this LibTorch has no operator " +
                   c10::toString(dispatch_runtime::operator_name(schema, policy)) + " (schema " + schema + ")"};
  for (auto& [k, v] : attrs) {
    if (k == "schema" || k == dispatch_runtime::run_layout_attr()) continue;
    bool found = false;
    for (const c10::Argument& a : h->schema().arguments()) found = found || a.name() == k;
    if (!found) throw op_error{"attrs." + k + ": " + c10::toString(h->schema()) + " has no argument '" + k + "'"};
  }
  return dispatch_runtime::prepare(*h, positional_of(args), attrs, policy);
}

// `f`'s value, or its failure as the plan's author reads it: an op_error's message,
// LibTorch's (without its C++ backtrace) after the op's name, any other exception's.
template <class F>
auto guarded(const std::string& name, F&& f) -> result<decltype(f())> {
  try {
    return f();
  } catch (const op_error& err) {
    return error{err.message};
  } catch (const c10::Error& err) {
    return error{name + ": " + err.what_without_backtrace()};
  } catch (const std::exception& err) {
    return error{name + ": " + err.what()};
  }
}

}  // namespace

const std::vector<std::string>& library_op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (auto& [k, e] : table()) v.push_back(k);
    return v;
  }();
  return names;
}

bool is_library_op(std::string_view op) { return table().count(base_name(op)) > 0; }

status check_library_op(std::string_view op, const std::map<std::string, std::string>& attrs) {
  if (auto it = attrs.find("schema"); it != attrs.end()) {
    if (dispatch_runtime::find_operator(it->second, attrs, reviewer_policy{std::string(op)})) return {};
    return error{std::string(op) + ": this LibTorch's dispatcher has no operator for the schema " + it->second};
  }
  if (is_library_op(op)) return {};
  return error{std::string(op) + " is not among the ATen ops the reviewer runs (" + [] {
    std::string list;
    for (auto& n : library_op_names()) list += (list.empty() ? "" : ", ") + n;
    return list;
  }() + "), and the step carries no attrs.schema to call it through the dispatcher"};
}

result<at::Tensor> run_library_op(std::string_view op, const std::vector<library_arg>& args,
                                  const std::map<std::string, std::string>& attrs, const c10::Device& plan_device) {
  auto all = run_library_op_outputs(op, args, attrs, plan_device);
  if (!all) return all.error();
  if (all->empty()) return error{std::string(op) + ": returns no tensor"};
  return all->front();
}

struct prepared_library_op_state {
  std::string op;    // as the step names it (aten::add.Tensor)
  std::string name;  // without the overload (aten::add)
  attrs_t attrs;
  const op_entry* entry = nullptr;                      // a table op
  std::optional<reviewer_policy> policy;                // a dispatcher step:
  std::optional<dispatch_runtime::prepared_step> step;  // its operator and stack
  std::vector<bool> tensor_args;                        // the kinds prepared for
  std::vector<bool> float_args;
};

const std::string& prepared_library_op::op() const { return state_->op; }

result<prepared_library_op> prepare_library_op(std::string_view op, const std::vector<library_arg>& args,
                                               const std::map<std::string, std::string>& attrs) {
  auto st = std::make_shared<prepared_library_op_state>();
  st->op = std::string(op);
  st->name = base_name(op);
  st->attrs = attrs;
  for (const library_arg& a : args) {
    st->tensor_args.push_back(a.is_tensor());
    st->float_args.push_back(!a.is_tensor() && a.is_float);
  }
  if (attrs.count("schema")) {
    st->policy = reviewer_policy{st->op};
    auto step = guarded(st->name, [&] { return prepare_by_schema(*st->policy, args, attrs); });
    if (!step) return step.error();
    st->step = std::move(step.value());
  } else {
    auto it = table().find(st->name);
    if (it == table().end()) {
      std::string list;
      for (auto& n : library_op_names()) list += (list.empty() ? "" : ", ") + n;
      return error{std::string(op) + " is not among the ATen ops the reviewer runs (" + list + ")"};
    }
    const op_entry& e = it->second;
    if (args.size() < e.min_args || args.size() > e.max_args)
      return error{"args: " + st->name + " takes " +
                   (e.min_args == e.max_args ? std::to_string(e.min_args)
                                             : std::to_string(e.min_args) + " or " + std::to_string(e.max_args)) +
                   " arguments, got " + std::to_string(args.size())};
    st->entry = &e;
  }
  prepared_library_op p;
  p.state_ = std::move(st);
  return p;
}

result<std::vector<at::Tensor>> run_prepared_library_op(const prepared_library_op& step,
                                                        const std::vector<library_arg>& args,
                                                        const c10::Device& plan_device) {
  const prepared_library_op_state& st = *step.state_;
  bool fits = args.size() == st.tensor_args.size();
  for (size_t k = 0; fits && k < args.size(); ++k)
    fits = args[k].is_tensor() == st.tensor_args[k] && (!args[k].is_tensor() && args[k].is_float) == st.float_args[k];
  if (!fits)
    return error{"args: " + st.op + " was prepared for " + std::to_string(st.tensor_args.size()) +
                 " arguments of other kinds than the " + std::to_string(args.size()) + " given"};
  if (st.step)
    return guarded(st.name,
                   [&] { return dispatch_runtime::run(*st.step, positional_of(args), *st.policy, plan_device); });
  return guarded(st.name, [&] { return std::vector<at::Tensor>{st.entry->run(args, st.attrs)}; });
}

result<std::vector<at::Tensor>> run_library_op_outputs(std::string_view op, const std::vector<library_arg>& args,
                                                       const std::map<std::string, std::string>& attrs,
                                                       const c10::Device& plan_device) {
  auto step = prepare_library_op(op, args, attrs);
  if (!step) return step.error();
  return run_prepared_library_op(*step, args, plan_device);
}

}  // namespace ks
