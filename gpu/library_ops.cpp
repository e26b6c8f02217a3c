#include "gpu/library_ops.hpp"

#include <charconv>
#include <functional>
#include <optional>

#include <ATen/Functions.h>

namespace ks {

namespace {

using attrs_t = std::map<std::string, std::string>;
using args_t = std::vector<library_arg>;

// Thrown by the parsers below and caught in run_library_op: a message for the plan's
// author.
struct op_error {
  std::string message;
};

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool parse_int(const std::string& text, int64_t& out) {
  auto t = trim(text);
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return !t.empty() && ec == std::errc() && p == t.data() + t.size();
}

bool parse_double(const std::string& text, double& out) {
  auto t = trim(text);
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return !t.empty() && ec == std::errc() && p == t.data() + t.size();
}

// An integer, or a list of n integers ("2", "[1, 2]", "(1, 2)"); one value is repeated.
std::vector<int64_t> int_list(const attrs_t& attrs, const std::string& key, size_t n,
                              std::vector<int64_t> fallback) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  std::string body = trim(it->second);
  if (!body.empty() && (body.front() == '[' || body.front() == '(')) body = body.substr(1, body.size() - 2);
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t comma = body.find(',', start);
    int64_t v = 0;
    if (!parse_int(body.substr(start, comma == std::string::npos ? std::string::npos : comma - start), v))
      throw op_error{"attrs." + key + ": expected an integer or a list of " + std::to_string(n) +
                     " integers, got \"" + it->second + "\""};
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() == 1) out.assign(n, out[0]);
  if (out.size() != n)
    throw op_error{"attrs." + key + ": expected " + std::to_string(n) + " integers, got \"" +
                   it->second + "\""};
  return out;
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
  std::string v = trim(it->second);
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
                           if (pad != at_.end() && (trim(pad->second) == "same" || trim(pad->second) == "valid")) {
                             std::string mode = trim(pad->second);
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

result<at::Tensor> run_library_op(std::string_view op, const std::vector<library_arg>& args,
                                  const std::map<std::string, std::string>& attrs) {
  const std::string name = base_name(op);
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
    return e.run(args, attrs);
  } catch (const op_error& err) {
    return error{err.message};
  } catch (const c10::Error& err) {
    return error{name + ": " + err.what_without_backtrace()};
  } catch (const std::exception& err) {
    return error{name + ": " + err.what()};
  }
}

}  // namespace ks
