#include "gpu/library_ops.hpp"

#include <functional>
#include <optional>

#include <ATen/Functions.h>
#include <ATen/core/dispatch/Dispatcher.h>

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
std::vector<int64_t> int_list(const attrs_t& attrs, const std::string& key, size_t n,
                              std::vector<int64_t> fallback) {
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
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  std::string v = trim_blanks(it->second);
  for (auto& a : allowed)
    if (v == a) return v;
  std::string list;
  for (auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw op_error{"attrs." + key + ": expected one of " + list + ", got \"" + it->second + "\""};
}

const at::Tensor& tensor_arg(const args_t& args, size_t i) {
  if (i >= args.size() || !args[i].is_tensor())
    throw op_error{"args[" + std::to_string(i) + "]: expected a tensor"};
  return args[i].tensor;
}

at::Scalar number_of(const library_arg& a) {
  return a.is_float ? at::Scalar(a.float_value) : at::Scalar(a.int_value);
}

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

const std::map<std::string, op_entry>& table() {
  static const std::map<std::string, op_entry> t = [] {
    std::map<std::string, op_entry> m;
    m["aten::matmul"] = {2, 2, [](const args_t& a, const attrs_t&) { return at::matmul(tensor_arg(a, 0), tensor_arg(a, 1)); }};
    m["aten::mm"] = {2, 2, [](const args_t& a, const attrs_t&) { return at::mm(tensor_arg(a, 0), tensor_arg(a, 1)); }};
    m["aten::bmm"] = {2, 2, [](const args_t& a, const attrs_t&) { return at::bmm(tensor_arg(a, 0), tensor_arg(a, 1)); }};
    m["aten::addmm"] = {3, 3, [](const args_t& a, const attrs_t& at_) {
                          return at::addmm(tensor_arg(a, 0), tensor_arg(a, 1), tensor_arg(a, 2),
                                           scalar_attr(at_, "beta", 1.0), scalar_attr(at_, "alpha", 1.0));
                        }};
    m["aten::linear"] = {2, 3, [](const args_t& a, const attrs_t&) {
                           at::Tensor bias = a.size() > 2 ? tensor_arg(a, 2) : at::Tensor();
                           return at::linear(tensor_arg(a, 0), tensor_arg(a, 1), bias);
                         }};
    m["aten::conv2d"] = {2, 3, [](const args_t& a, const attrs_t& at_) {
                           at::Tensor bias = a.size() > 2 ? tensor_arg(a, 2) : at::Tensor();
                           auto stride = int_list(at_, "stride", 2, {1, 1});
                           auto dilation = int_list(at_, "dilation", 2, {1, 1});
                           int64_t groups = int_attr(at_, "groups", 1);
                           auto pad = at_.find("padding");
                           if (pad != at_.end() && (trim_blanks(pad->second) == "same" || trim_blanks(pad->second) == "valid")) {
                             std::string mode = trim_blanks(pad->second);
                             return at::conv2d(tensor_arg(a, 0), tensor_arg(a, 1), bias, stride,
                                               c10::string_view(mode.c_str()), dilation, groups);
                           }
                           auto padding = int_list(at_, "padding", 2, {0, 0});
                           return at::conv2d(tensor_arg(a, 0), tensor_arg(a, 1), bias, stride, padding,
                                             dilation, groups);
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
// Dispatcher steps: any ATen op, by its schema.

// "aten::sort.stable(Tensor self, ...) -> ..." → {"aten::sort", "stable"}.
c10::OperatorName operator_name(const std::string& schema) {
  std::string head = trim_blanks(schema.substr(0, schema.find('(')));
  size_t dot = head.find('.', head.find("::"));
  return {head.substr(0, dot), dot == std::string::npos ? std::string() : head.substr(dot + 1)};
}

// The operator the schema names; an older or newer LibTorch may lack that exact
// overload, so an overload of the same name whose arguments include every attribute
// is taken instead.
std::optional<c10::OperatorHandle> find_operator(const std::string& schema, const attrs_t& attrs) {
  auto& d = c10::Dispatcher::singleton();
  c10::OperatorName name = operator_name(schema);
  if (auto h = d.findSchema(name)) return *h;
  for (const c10::OperatorName& other : d.getAllOpNames()) {
    if (other.name != name.name) continue;
    auto h = d.findSchema(other);
    if (!h) continue;
    bool fits = true;
    for (auto& [k, v] : attrs) {
      if (k == "schema") continue;
      bool found = false;
      for (const c10::Argument& a : h->schema().arguments()) found = found || a.name() == k;
      fits = fits && found;
    }
    if (fits) return *h;
  }
  return std::nullopt;
}

// Builds the dispatcher's stack for `h` from the step, argument by argument.
struct stack_builder {
  const c10::OperatorHandle& h;
  const args_t& args;
  const attrs_t& attrs;
  size_t next = 0;  // the next positional argument
  c10::Device device{c10::kCPU};

  c10::IValue scalar(const c10::TypePtr& type, const std::string& key, const std::string& text) {
    const std::string field = "attrs." + key;
    switch (type->kind()) {
      case c10::TypeKind::OptionalType:
        if (trim_blanks(text) == "None") return c10::IValue();
        return scalar(type->expectRef<c10::OptionalType>().getElementType(), key, text);
      case c10::TypeKind::IntType: {
        int64_t v = 0;
        if (!parse_int(text, v)) throw op_error{field + ": expected an integer, got \"" + text + "\""};
        return v;
      }
      case c10::TypeKind::FloatType: {
        double v = 0;
        if (!parse_double(text, v)) throw op_error{field + ": expected a number, got \"" + text + "\""};
        return v;
      }
      case c10::TypeKind::BoolType: {
        bool v = false;
        if (!parse_bool(text, v)) throw op_error{field + ": expected True or False, got \"" + text + "\""};
        return v;
      }
      case c10::TypeKind::NumberType: {
        int64_t i = 0;
        double v = 0;
        if (parse_int(text, i)) return i;
        if (parse_double(text, v)) return v;
        throw op_error{field + ": expected a number, got \"" + text + "\""};
      }
      case c10::TypeKind::StringType:
        return text;
      case c10::TypeKind::DeviceObjType:
        return device;  // a reference's device constant means where the inputs are
      case c10::TypeKind::ListType: {
        const c10::TypePtr& e = type->expectRef<c10::ListType>().getElementType();
        if (e->kind() == c10::TypeKind::IntType) {
          std::vector<int64_t> v;
          for (auto& item : list_items(text)) {
            int64_t x = 0;
            if (!parse_int(item, x)) throw op_error{field + ": expected a list of integers, got \"" + text + "\""};
            v.push_back(x);
          }
          return v;
        }
        if (e->kind() == c10::TypeKind::FloatType) {
          std::vector<double> v;
          for (auto& item : list_items(text)) {
            double x = 0;
            if (!parse_double(item, x)) throw op_error{field + ": expected a list of numbers, got \"" + text + "\""};
            v.push_back(x);
          }
          return v;
        }
        if (e->kind() == c10::TypeKind::BoolType) {
          c10::List<bool> v;
          for (auto& item : list_items(text)) {
            bool x = false;
            if (!parse_bool(item, x)) throw op_error{field + ": expected a list of True/False, got \"" + text + "\""};
            v.push_back(x);
          }
          return v;
        }
        break;
      }
      default:
        break;
    }
    throw op_error{field + ": arguments of type " + type->str() + " cannot be given as attributes"};
  }

  const library_arg& positional(const std::string& what) {
    if (next >= args.size())
      throw op_error{"args: " + h.schema().name() + " needs a positional argument for " + what + ", and args has only " +
                     std::to_string(args.size())};
    return args[next++];
  }

  c10::IValue argument(const c10::Argument& a) {
    const c10::TypePtr& type = a.type();
    const bool optional = type->kind() == c10::TypeKind::OptionalType;
    const c10::TypePtr& base = optional ? type->expectRef<c10::OptionalType>().getElementType() : type;
    auto it = attrs.find(a.name());
    if (base->kind() == c10::TypeKind::ListType &&
        base->expectRef<c10::ListType>().getElementType()->kind() != c10::TypeKind::IntType &&
        base->expectRef<c10::ListType>().getElementType()->kind() != c10::TypeKind::FloatType &&
        base->expectRef<c10::ListType>().getElementType()->kind() != c10::TypeKind::BoolType) {
      // A tensor list: "N tensors" takes the next N positional tensors.
      if (it == attrs.end()) throw op_error{"attrs." + a.name() + ": a tensor list needs \"N tensors\""};
      if (optional && trim_blanks(it->second) == "None") return c10::IValue();
      int64_t n = 0;
      std::string t = trim_blanks(it->second);
      if (!parse_int(t.substr(0, t.find(' ')), n) || n < 0)
        throw op_error{"attrs." + a.name() + ": expected \"N tensors\", got \"" + it->second + "\""};
      const bool of_optional = base->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::OptionalType;
      c10::List<at::Tensor> tensors;
      c10::List<c10::optional<at::Tensor>> maybe;
      for (int64_t k = 0; k < n; ++k) {
        const library_arg& x = positional(a.name() + "[" + std::to_string(k) + "]");
        if (!x.is_tensor()) throw op_error{"args: " + a.name() + "[" + std::to_string(k) + "] must be a tensor"};
        if (of_optional) maybe.push_back(x.tensor);
        else tensors.push_back(x.tensor);
      }
      return of_optional ? c10::IValue(maybe) : c10::IValue(tensors);
    }
    if (it != attrs.end()) {
      if (base->kind() == c10::TypeKind::TensorType) {
        if (optional && trim_blanks(it->second) == "None") return c10::IValue();
        throw op_error{"attrs." + a.name() + ": a tensor argument comes from args (or is None when optional)"};
      }
      return scalar(type, a.name(), it->second);
    }
    if (base->kind() == c10::TypeKind::TensorType) {
      if (next < args.size() || !a.default_value()) {
        const library_arg& x = positional(a.name());
        if (!x.is_tensor()) throw op_error{"args: " + a.name() + " must be a tensor"};
        return x.tensor;
      }
    }
    if (a.default_value()) return *a.default_value();
    if (optional) return c10::IValue();
    if (base->kind() == c10::TypeKind::DeviceObjType) return device;
    if (next < args.size() && !args[next].is_tensor()) {
      const library_arg& x = positional(a.name());
      if (x.is_float) return x.float_value;
      return x.int_value;
    }
    throw op_error{"attrs: " + h.schema().name() + " needs the argument " + a.name() + " (" + type->str() + ")"};
  }
};

std::vector<at::Tensor> run_by_schema(const std::string& op, const args_t& args, const attrs_t& attrs) {
  const std::string& schema = attrs.at("schema");
  auto h = find_operator(schema, attrs);
  if (!h) throw op_error{op + ": this LibTorch has no operator " + c10::toString(operator_name(schema)) + " (schema " + schema + ")"};
  for (auto& [k, v] : attrs) {
    if (k == "schema") continue;
    bool found = false;
    for (const c10::Argument& a : h->schema().arguments()) found = found || a.name() == k;
    if (!found) throw op_error{"attrs." + k + ": " + c10::toString(h->schema()) + " has no argument '" + k + "'"};
  }
  stack_builder b{*h, args, attrs};
  for (auto& a : args)
    if (a.is_tensor()) {
      b.device = a.tensor.device();
      break;
    }
  torch::jit::Stack stack;
  for (const c10::Argument& a : h->schema().arguments()) stack.push_back(b.argument(a));
  if (b.next != args.size())
    throw op_error{"args: " + std::to_string(args.size()) + " given, " + c10::toString(h->schema()) + " takes " +
                   std::to_string(b.next) + " of them"};
  h->callBoxed(stack);
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < stack.size(); ++k) {
    if (!stack[k].isTensor())
      throw op_error{op + ": result " + std::to_string(k) + " is a " + stack[k].tagKind() +
                     "; a library step returns tensors only"};
    out.push_back(stack[k].toTensor());
  }
  return out;
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
    if (find_operator(it->second, attrs)) return {};
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
                                  const std::map<std::string, std::string>& attrs) {
  auto all = run_library_op_outputs(op, args, attrs);
  if (!all) return all.error();
  if (all->empty()) return error{std::string(op) + ": returns no tensor"};
  return all->front();
}

result<std::vector<at::Tensor>> run_library_op_outputs(std::string_view op, const std::vector<library_arg>& args,
                                                       const std::map<std::string, std::string>& attrs) {
  const std::string name = base_name(op);
  if (attrs.count("schema")) {
    try {
      return run_by_schema(std::string(op), args, attrs);
    } catch (const op_error& err) {
      return error{err.message};
    } catch (const c10::Error& err) {
      return error{name + ": " + err.what_without_backtrace()};
    } catch (const std::exception& err) {
      return error{name + ": " + err.what()};
    }
  }
  auto it = table().find(name);
  if (it == table().end()) {
    std::string list;
    for (auto& n : library_op_names()) list += (list.empty() ? "" : ", ") + n;
    return error{std::string(op) + " is not among the ATen ops the reviewer runs (" + list + ")"};
  }
  const op_entry& e = it->second;
  if (args.size() < e.min_args || args.size() > e.max_args)
    return error{"args: " + name + " takes " +
                 (e.min_args == e.max_args ? std::to_string(e.min_args)
                                           : std::to_string(e.min_args) + " or " + std::to_string(e.max_args)) +
                 " arguments, got " + std::to_string(args.size())};
  try {
    return std::vector<at::Tensor>{e.run(args, attrs)};
  } catch (const op_error& err) {
    return error{err.message};
  } catch (const c10::Error& err) {
    return error{name + ": " + err.what_without_backtrace()};
  } catch (const std::exception& err) {
    return error{name + ": " + err.what()};
  }
}

}  // namespace ks
