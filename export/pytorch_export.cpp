#include "export/pytorch_export.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "base/content_hash.hpp"
#include "export/embedded_runtime.hpp"
#include "plan/attr_parse.hpp"
#include "plan/kernel_signatures.hpp"

namespace ks {

namespace {

// ---------------------------------------------------------------------------
// Small text helpers.

// A C++ string literal.
std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

// A one-line Python string literal.
std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out + "\"";
}

// A triple-quoted Python string that reads back as `s` exactly and stays readable:
// backslashes are doubled; a '"' is escaped only where it could close the literal
// (before another '"', or as the last character).
std::string py_block_string(const std::string& s) {
  std::string out = "\"\"\"";
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\') out += "\\\\";
    else if (c == '"' && (i + 1 == s.size() || s[i + 1] == '"')) out += "\\\"";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out + "\"\"\"";
}

// A double as a literal that reads back to the same value (C++ and Python alike).
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string ident(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

std::string shape_list(const std::vector<int64_t>& shape, const char* open = "[", const char* close = "]") {
  std::string s = open;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + close;
}

// ---------------------------------------------------------------------------
// dtypes

const char* aten_dtype(const std::string& dtype) {
  if (dtype == "float32") return "at::kFloat";
  if (dtype == "float16") return "at::kHalf";
  if (dtype == "bfloat16") return "at::kBFloat16";
  if (dtype == "float64") return "at::kDouble";
  if (dtype == "int32") return "at::kInt";
  if (dtype == "int64") return "at::kLong";
  if (dtype == "bool") return "at::kBool";
  return nullptr;
}

// ---------------------------------------------------------------------------
// Library steps: the at:: call for each op the reviewer runs (gpu/library_ops.cpp).

using attrs_t = std::map<std::string, std::string>;

// A number attribute as an at::Scalar expression: an integer when it reads as one.
result<std::string> scalar_attr(const attrs_t& attrs, const std::string& key, const std::string& fallback) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  int64_t i = 0;
  if (parse_int(it->second, i)) return "at::Scalar(static_cast<int64_t>(" + std::to_string(i) + "LL))";
  double d = 0;
  if (parse_double(it->second, d) && std::isfinite(d)) return "at::Scalar(" + number(d) + ")";
  return error{"attrs." + key + ": expected a number, got \"" + it->second + "\""};
}

result<std::string> choice_attr(const attrs_t& attrs, const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& allowed) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  std::string v = trim_blanks(it->second);
  for (auto& a : allowed)
    if (v == a) return v;
  return error{"attrs." + key + ": expected one of " + join(allowed, ", ") + ", got \"" + it->second + "\""};
}

// The at:: expression for a library step, given its arguments as C++ expressions
// (tensors: a variable; numbers: an at::Scalar). `pre` receives declarations the call
// needs (integer lists for conv2d).
result<std::string> library_call(const resolved_step& s, const std::vector<std::string>& a,
                                 const std::vector<bool>& is_tensor, std::string& pre) {
  std::string op = s.name.substr(0, s.name.find('.'));  // aten::add.Tensor → aten::add
  auto nargs = [&](size_t lo, size_t hi) -> status {
    if (a.size() < lo || a.size() > hi)
      return error{"args: " + op + " takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)) +
                   " arguments, got " + std::to_string(a.size())};
    return {};
  };
  auto tensors = [&](size_t n) -> status {
    for (size_t i = 0; i < n && i < a.size(); ++i)
      if (!is_tensor[i]) return error{"args[" + std::to_string(i) + "]: " + op + " expects a tensor here"};
    return {};
  };
  auto both = [&](size_t lo, size_t hi, size_t t) -> status {
    if (auto st = nargs(lo, hi); !st) return st;
    return tensors(t);
  };
  const std::string v = "s" + std::to_string(s.index) + "_";
  if (op == "aten::matmul" || op == "aten::mm" || op == "aten::bmm") {
    if (auto st = both(2, 2, 2); !st) return error{st.message()};
    return "at::" + op.substr(6) + "(" + a[0] + ", " + a[1] + ")";
  }
  if (op == "aten::addmm") {
    if (auto st = both(3, 3, 3); !st) return error{st.message()};
    auto beta = scalar_attr(s.attrs, "beta", "at::Scalar(1.0)");
    if (!beta) return error{beta.message()};
    auto alpha = scalar_attr(s.attrs, "alpha", "at::Scalar(1.0)");
    if (!alpha) return error{alpha.message()};
    return "at::addmm(" + a[0] + ", " + a[1] + ", " + a[2] + ", " + *beta + ", " + *alpha + ")";
  }
  if (op == "aten::linear") {
    if (auto st = both(2, 3, a.size()); !st) return error{st.message()};
    return "at::linear(" + a[0] + ", " + a[1] + (a.size() > 2 ? ", " + a[2] : std::string()) + ")";
  }
  if (op == "aten::conv2d") {
    if (auto st = both(2, 3, a.size()); !st) return error{st.message()};
    auto stride = int_list_attr(s.attrs, "stride", 2, {1, 1});
    if (!stride) return error{stride.message()};
    auto dilation = int_list_attr(s.attrs, "dilation", 2, {1, 1});
    if (!dilation) return error{dilation.message()};
    auto groups = int_list_attr(s.attrs, "groups", 1, {1});
    if (!groups) return error{groups.message()};
    pre += "  const std::vector<int64_t> " + v + "stride" + shape_list(*stride, "{", "}") + ";\n";
    pre += "  const std::vector<int64_t> " + v + "dilation" + shape_list(*dilation, "{", "}") + ";\n";
    std::string bias = a.size() > 2 ? a[2] : "std::optional<at::Tensor>()";
    std::string head = "at::conv2d(" + a[0] + ", " + a[1] + ", " + bias + ", at::IntArrayRef(" + v + "stride), ";
    std::string tail = ", at::IntArrayRef(" + v + "dilation), static_cast<int64_t>(" + std::to_string((*groups)[0]) + "))";
    auto pad = s.attrs.find("padding");
    if (pad != s.attrs.end() && (trim_blanks(pad->second) == "same" || trim_blanks(pad->second) == "valid"))
      return head + cpp_string(trim_blanks(pad->second)) + tail;
    auto padding = int_list_attr(s.attrs, "padding", 2, {0, 0});
    if (!padding) return error{padding.message()};
    pre += "  const std::vector<int64_t> " + v + "padding" + shape_list(*padding, "{", "}") + ";\n";
    return head + "at::IntArrayRef(" + v + "padding)" + tail;
  }
  if (op == "aten::add" || op == "aten::sub") {
    if (auto st = both(2, 2, 1); !st) return error{st.message()};
    auto alpha = scalar_attr(s.attrs, "alpha", "at::Scalar(static_cast<int64_t>(1))");
    if (!alpha) return error{alpha.message()};
    return "at::" + op.substr(6) + "(" + a[0] + ", " + a[1] + ", " + *alpha + ")";
  }
  if (op == "aten::mul") {
    if (auto st = both(2, 2, 1); !st) return error{st.message()};
    return "at::mul(" + a[0] + ", " + a[1] + ")";
  }
  if (op == "aten::div") {
    if (auto st = both(2, 2, 1); !st) return error{st.message()};
    if (!s.attrs.count("rounding_mode")) return "at::div(" + a[0] + ", " + a[1] + ")";
    auto mode = choice_attr(s.attrs, "rounding_mode", "", {"trunc", "floor"});
    if (!mode) return error{mode.message()};
    return "at::div(" + a[0] + ", " + a[1] + ", " + cpp_string(*mode) + ")";
  }
  if (op == "aten::softmax" || op == "aten::log_softmax") {
    if (auto st = both(1, 1, 1); !st) return error{st.message()};
    if (!s.attrs.count("dim")) return error{"attrs: " + op + " needs the attribute dim"};
    auto dim = int_list_attr(s.attrs, "dim", 1, {});
    if (!dim) return error{dim.message()};
    return "at::" + op.substr(6) + "(" + a[0] + ", static_cast<int64_t>(" + std::to_string((*dim)[0]) + "))";
  }
  if (op == "aten::gelu") {
    if (auto st = both(1, 1, 1); !st) return error{st.message()};
    auto mode = choice_attr(s.attrs, "approximate", "none", {"none", "tanh"});
    if (!mode) return error{mode.message()};
    return "at::gelu(" + a[0] + ", " + cpp_string(*mode) + ")";
  }
  static const std::set<std::string> unary = {"relu", "sigmoid", "tanh", "exp", "log", "neg",
                                              "abs",  "sqrt",    "rsqrt", "silu", "sin", "cos"};
  if (op.rfind("aten::", 0) == 0 && unary.count(op.substr(6))) {
    if (auto st = both(1, 1, 1); !st) return error{st.message()};
    return "at::" + op.substr(6) + "(" + a[0] + ")";
  }
  return error{op + " has no at:: counterpart in the exporter (it exports the ops the reviewer runs: "
                    "aten::matmul mm bmm addmm linear conv2d add sub mul div softmax log_softmax gelu "
                    "relu sigmoid tanh exp log neg abs sqrt rsqrt silu sin cos)"};
}

// ---------------------------------------------------------------------------
// Kernel arguments.

// The type a launcher casts a tensor's data_ptr() to for this parameter:
// the declared type without __restrict__ (and an array parameter as a pointer).
std::string pointer_cast_type(const kernel_param& p) {
  std::string t = p.type;
  for (const char* r : {"__restrict__", "__restrict"}) {
    for (size_t pos; (pos = t.find(r)) != std::string::npos;) t.erase(pos, std::string(r).size());
  }
  t = trim_blanks(t);
  while (t.find("  ") != std::string::npos) t.erase(t.find("  "), 1);
  if (t.find('*') == std::string::npos) t += "*";
  return t;
}

std::string scalar_literal(const resolved_arg& a) {
  if (a.kind == "int") {
    if (a.type == "int64") return "static_cast<long long>(" + std::to_string(a.int_value) + "LL)";
    return "static_cast<int>(" + std::to_string(a.int_value) + ")";
  }
  if (a.type == "float32") return "static_cast<float>(" + number(a.float_value) + ")";
  return "static_cast<double>(" + number(a.float_value) + ")";
}

std::string dims3(const std::array<int64_t, 3>& d) {
  return "dim3(" + std::to_string(d[0]) + "u, " + std::to_string(d[1]) + "u, " + std::to_string(d[2]) + "u)";
}

// ---------------------------------------------------------------------------
// One size: the plan resolved at those shapes, as a C++ function.

struct size_variant {
  std::string name;                                   // "default", "cpu", …
  std::vector<std::vector<int64_t>> shapes;           // inputs then parameters
  resolved_plan plan;
};

std::string var(const std::string& tensor) { return "t_" + ident(tensor); }


// Runtime helpers for dispatcher steps (a library step with attrs.schema), emitted
// when a plan has one: gpu/dispatch_runtime.hpp, the reviewer's own way of calling any
// ATen op by its schema (gpu/library_ops.cpp), so the exported module runs the op as
// the review did, and the module's side of it (export/launcher_dispatch.inc: ks_arg,
// ks_call_by_schema), both embedded at build time.
const std::string& dispatch_runtime_text() {
  static const std::string text =
      std::string(embedded::dispatch_runtime_hpp()) + std::string(embedded::launcher_dispatch_inc());
  return text;
}

// The C++ for a library step's call and its results: `call` is an at::Tensor
// expression (a table op) or, for a dispatcher step, a std::vector<at::Tensor> one.
// New intermediates are declared in `decls` (before the block, so that later steps
// see them); results written into declared buffers are checked and copied.
std::string library_results(const std::string& label, const std::vector<std::string>& outputs, bool vector_call,
                            const std::string& call, const std::string& pre,
                            const std::function<bool(const std::string&)>& is_declared_buffer, std::string& decls) {
  std::ostringstream o;
  o << "  {\n" << pre;
  o << "    const std::vector<at::Tensor> r = " << (vector_call ? call : "{" + call + "}") << ";\n"
    << "    TORCH_CHECK(r.size() >= " << outputs.size() << ", "
    << cpp_string(label + ": the op returned fewer tensors than the step names (" + std::to_string(outputs.size()) + ")")
    << ");\n";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string& out = outputs[k];
    if (is_declared_buffer(out)) {
      o << "    TORCH_CHECK(r[" << k << "].sizes() == " << var(out) << ".sizes() && r[" << k << "].scalar_type() == "
        << var(out) << ".scalar_type(), "
        << cpp_string(label + ": the op's result does not match the declared buffer '" + out + "'") << ");\n"
        << "    " << var(out) << ".copy_(r[" << k << "]);\n";
    } else {
      decls += "  at::Tensor " + var(out) + ";\n";
      o << "    " << var(out) << " = r[" << k << "].contiguous();\n";
    }
  }
  o << "  }\n";
  return o.str();
}

// The dispatcher call of a step with attrs.schema: its attributes as a map, its
// arguments as ks_arg expressions.
std::string dispatch_call(const std::map<std::string, std::string>& attrs, const std::vector<std::string>& args) {
  std::string m = "std::map<std::string, std::string>{";
  bool first = true;
  for (auto& [k, v] : attrs) {
    m += std::string(first ? "" : ", ") + "{" + cpp_string(k) + ", " + cpp_string(v) + "}";
    first = false;
  }
  m += "}";
  return "ks_call_by_schema(" + m + ", std::vector<ks_arg>{" + join(args, ", ") + "})";
}

result<std::string> size_function(const task_spec& task, const size_variant& v,
                                  const std::vector<kernel_signature>& kernels, const std::string& fn) {
  std::ostringstream o;
  o << "// The plan resolved at the '" << v.name << "' shapes.\n";
  o << "static std::vector<at::Tensor> " << fn << "(const std::vector<at::Tensor>& in) {\n";
  o << "  const at::TensorOptions options = at::TensorOptions().device(in[0].device());\n";
  o << "  cudaStream_t stream = at::cuda::getCurrentCUDAStream();\n";
  o << "  (void)stream;\n";
  size_t k = 0;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) o << "  const at::Tensor& " << var(t.name) << " = in[" << k++ << "];\n";
  for (const auto* list : {&v.plan.outputs, &v.plan.scratch})
    for (const auto& b : *list) {
      const char* dt = aten_dtype(b.dtype);
      if (!dt) return error{"buffer '" + b.name + "': dtype " + b.dtype + " cannot be exported"};
      o << "  at::Tensor " << var(b.name) << " = at::" << (b.init == "zeros" ? "zeros" : "empty") << "("
        << (b.shape.empty() ? std::string("at::IntArrayRef()") : shape_list(b.shape, "{", "}")) << ", options.dtype(" << dt << "));  // " << to_string(b.role) << "\n";
    }
  std::set<std::string> declared;  // intermediates already declared
  for (const auto& s : v.plan.steps) {
    o << "  // " << s.label() << "\n";
    if (s.kind == "kernel") {
      const kernel_signature* sig = find_kernel(kernels, s.name);
      if (!sig) return error{s.label() + ": the source has no kernel '" + s.name + "'"};
      if (sig->params.size() != s.args.size())
        return error{s.label() + ": " + std::to_string(s.args.size()) + " arguments for " +
                     std::to_string(sig->params.size()) + " parameters"};
      std::vector<std::string> args;
      for (size_t i = 0; i < s.args.size(); ++i) {
        const resolved_arg& a = s.args[i];
        const kernel_param& p = sig->params[i];
        if (a.kind == "tensor") {
          if (!p.is_pointer)
            return error{s.label() + ": args[" + std::to_string(i) + "]: tensor '" + a.tensor +
                         "' passed to the non-pointer parameter '" + p.type + " " + p.name + "'"};
          args.push_back("static_cast<" + pointer_cast_type(p) + ">(" + var(a.tensor) + ".data_ptr())");
        } else {
          args.push_back(scalar_literal(a));
        }
      }
      if (s.shared_mem_bytes > 0) {
        // Past 48 KiB a kernel must be opted in; raising the limit to what the step uses
        // is harmless below it. Once per process and step.
        o << "  static const bool smem_" << s.index << " = [] {\n"
          << "    C10_CUDA_CHECK(cudaFuncSetAttribute(" << s.name << ", cudaFuncAttributeMaxDynamicSharedMemorySize, "
          << s.shared_mem_bytes << "));\n"
          << "    return true;\n  }();\n  (void)smem_" << s.index << ";\n";
      }
      o << "  KS_LAUNCH(" << s.name << ", " << dims3(s.grid) << ", " << dims3(s.block) << ", "
        << s.shared_mem_bytes << ", stream";
      for (auto& a : args) o << ",\n            " << a;
      o << ");\n";
      o << "  C10_CUDA_KERNEL_LAUNCH_CHECK();\n";
    } else {
      std::vector<std::string> a, dargs;
      std::vector<bool> is_tensor;
      for (const auto& arg : s.args) {
        is_tensor.push_back(arg.kind == "tensor");
        if (arg.kind == "tensor") {
          a.push_back(var(arg.tensor));
          dargs.push_back("ks_targ(" + var(arg.tensor) + ")");
        } else if (arg.kind == "int") {
          a.push_back("at::Scalar(static_cast<int64_t>(" + std::to_string(arg.int_value) + "LL))");
          dargs.push_back("ks_iarg(" + std::to_string(arg.int_value) + "LL)");
        } else {
          a.push_back("at::Scalar(" + number(arg.float_value) + ")");
          dargs.push_back("ks_farg(" + number(arg.float_value) + ")");
        }
      }
      std::string pre, call;
      const bool dispatcher = s.attrs.count("schema") > 0;
      if (dispatcher) {
        call = dispatch_call(s.attrs, dargs);
      } else {
        auto c = library_call(s, a, is_tensor, pre);
        if (!c) return error{s.label() + ": " + c.message()};
        if (s.outputs.size() != 1) return error{s.label() + ": outputs: this op writes one tensor"};
        call = *c;
      }
      if (s.outputs.empty()) return error{s.label() + ": outputs: the step names no result"};
      for (auto& out : s.outputs) {
        const resolved_buffer* b = v.plan.find_buffer(out);
        if (!(b && b->role != buffer_role::intermediate) && !declared.insert(out).second)
          return error{s.label() + ": intermediate '" + out + "' is produced twice"};
      }
      std::string decls;
      std::string block = library_results(
          s.label(), s.outputs, dispatcher, call, pre,
          [&](const std::string& n) {
            const resolved_buffer* b = v.plan.find_buffer(n);
            return b && b->role != buffer_role::intermediate;
          },
          decls);
      o << decls << block;
    }
  }
  o << "  return {";
  for (size_t i = 0; i < v.plan.outputs.size(); ++i) o << (i ? ", " : "") << var(v.plan.outputs[i].name);
  o << "};\n}\n";
  return o.str();
}


// ---------------------------------------------------------------------------
// The general-shape launcher: the plan's expressions translated to C++ over ks_v
// values (the runtime helpers below), so that they are evaluated for the shapes of
// the tensors forward() receives, with the plan language's rules (integer-first,
// Python's floor division and modulo, overflow and division by zero are errors).

// Runtime helpers, emitted once: plan/expr_runtime.hpp (the expression language's
// arithmetic, as plan/shape_expr.cpp computes it) and the ks_ functions over it that the
// translated expressions call (export/launcher_expr.inc), both embedded at build time.
const std::string& expr_runtime_text() {
  static const std::string text =
      std::string(embedded::expr_runtime_hpp()) + std::string(embedded::launcher_expr_inc());
  return text;
}

// Translates one plan expression into a C++ expression of type ks_v. `tensor` maps a
// tensor name the expression may read to its C++ variable (or returns empty: not
// available here); constants are c_NAME.
class expr_translator {
 public:
  expr_translator(std::string text, const std::set<std::string>& constants,
                  std::function<std::string(const std::string&)> tensor)
      : t_(std::move(text)), constants_(constants), tensor_(std::move(tensor)) {}

  result<std::string> run() {
    auto e = expr();
    if (!e) return e;
    skip();
    if (p_ != t_.size()) return fail("unexpected text");
    return e;
  }

 private:
  void skip() {
    while (p_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  bool eat(char c) {
    skip();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  error fail(const std::string& what) {
    return error{what + " at column " + std::to_string(p_ + 1) + " in \"" + t_ + "\""};
  }
  std::string name() {
    skip();
    size_t b = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_')) ++p_;
    return t_.substr(b, p_ - b);
  }
  result<std::string> expr() {
    auto a = term();
    if (!a) return a;
    std::string out = *a;
    while (true) {
      skip();
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) {
        char op = t_[p_++];
        auto b = term();
        if (!b) return b;
        out = std::string(op == '+' ? "ks_add(" : "ks_sub(") + out + ", " + *b + ")";
      } else {
        return out;
      }
    }
  }
  result<std::string> term() {
    auto a = unary();
    if (!a) return a;
    std::string out = *a;
    while (true) {
      skip();
      if (p_ < t_.size() && (t_[p_] == '*' || t_[p_] == '/' || t_[p_] == '%')) {
        char op = t_[p_++];
        auto b = unary();
        if (!b) return b;
        out = std::string(op == '*' ? "ks_mul(" : op == '/' ? "ks_div(" : "ks_mod(") + out + ", " + *b + ")";
      } else {
        return out;
      }
    }
  }
  result<std::string> unary() {
    if (eat('-')) {
      auto a = unary();
      if (!a) return a;
      return "ks_neg(" + *a + ")";
    }
    if (eat('+')) return unary();
    return primary();
  }
  result<std::string> primary() {
    skip();
    if (p_ >= t_.size()) return fail("unexpected end");
    char c = t_[p_];
    if (c == '(') {
      ++p_;
      auto e = expr();
      if (!e) return e;
      if (!eat(')')) return fail("expected ')'");
      return "(" + *e + ")";
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t b = p_;
      bool is_float = false;
      while (p_ < t_.size()) {
        char d = t_[p_];
        if (std::isdigit(static_cast<unsigned char>(d))) {
          ++p_;
        } else if (d == '.') {
          is_float = true;
          ++p_;
        } else if ((d == 'e' || d == 'E')) {
          is_float = true;
          ++p_;
          if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
        } else {
          break;
        }
      }
      std::string lit = t_.substr(b, p_ - b);
      if (is_float) {
        double v = 0;
        auto [q, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), v);
        if (ec != std::errc() || q != lit.data() + lit.size()) return fail("bad number '" + lit + "'");
        return "ks_real(" + number(v) + ")";
      }
      int64_t v = 0;
      auto [q, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), v);
      if (ec != std::errc() || q != lit.data() + lit.size()) return fail("bad integer '" + lit + "'");
      return "ks_int(" + std::to_string(v) + "LL)";
    }
    std::string n = name();
    if (n.empty()) return fail(std::string("unexpected '") + c + "'");
    if (eat('(')) {
      static const std::map<std::string, size_t> fns = {{"ceil_div", 2}, {"round_up", 2}, {"min", 2}, {"max", 2},
                                                        {"abs", 1},      {"floor", 1},    {"ceil", 1}, {"sqrt", 1}};
      auto f = fns.find(n);
      if (f == fns.end()) return fail("unknown function '" + n + "'");
      std::vector<std::string> args;
      if (!eat(')')) {
        while (true) {
          auto a = expr();
          if (!a) return a;
          args.push_back(*a);
          if (eat(')')) break;
          if (!eat(',')) return fail("expected ',' or ')'");
        }
      }
      if (args.size() != f->second) return fail(n + " takes " + std::to_string(f->second) + " arguments");
      return "ks_" + n + "(" + join(args, ", ") + ")";
    }
    if (eat('.')) {
      std::string var = tensor_(n);
      if (var.empty()) return fail("tensor '" + n + "' is not available here");
      std::string prop = name();
      if (prop == "numel") return "ks_numel(" + var + ")";
      if (prop == "ndim") return "ks_ndim(" + var + ")";
      if (prop != "shape" || !eat('[')) return fail("expected numel, ndim or shape[i]");
      auto i = expr();
      if (!i) return i;
      if (!eat(']')) return fail("expected ']'");
      return "ks_dim(" + var + ", " + *i + ", " + cpp_string(n) + ")";
    }
    if (!constants_.count(n)) return fail("unknown name '" + n + "'");
    return "c_" + ident(n);
  }

  std::string t_;
  size_t p_ = 0;
  const std::set<std::string>& constants_;
  std::function<std::string(const std::string&)> tensor_;
};

// The launcher for any shapes: `plan` evaluated at run time. Fails (and the export
// then has only the size-specialised launchers) where the plan reads a tensor's shape
// before that tensor exists in the generated code.
result<std::string> general_function(const task_spec& task, const launch_plan& plan,
                                     const std::vector<kernel_signature>& kernels) {
  std::ostringstream o;
  std::set<std::string> available;  // tensors declared so far
  std::set<std::string> constants;
  for (auto& [k, _] : plan.constants) constants.insert(k);
  auto tensor = [&](const std::string& n) { return available.count(n) ? var(n) : std::string(); };
  auto tr = [&](const std::string& text) -> result<std::string> {
    return expr_translator(text, constants, tensor).run();
  };
  o << "// The plan evaluated for the shapes forward() receives (any shapes; the launch\n"
    << "// itself then checks what the GPU allows).\n"
    << "static std::vector<at::Tensor> ks_run_general(const std::vector<at::Tensor>& in) {\n"
    << "  const at::TensorOptions options = at::TensorOptions().device(in[0].device());\n"
    << "  cudaStream_t stream = at::cuda::getCurrentCUDAStream();\n"
    << "  (void)stream;\n";
  size_t k = 0;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) {
      o << "  const at::Tensor& " << var(t.name) << " = in[" << k++ << "];\n";
      available.insert(t.name);
    }
  // Constants in dependency order.
  std::map<std::string, std::vector<std::string>> deps;
  for (auto& [name, text] : plan.constants) {
    auto e = shape_expr::parse(text);
    if (!e) return error{"constants." + name + ": " + e.message()};
    deps[name] = e->constant_names();
  }
  std::set<std::string> emitted;
  while (emitted.size() < plan.constants.size()) {
    bool progress = false;
    for (auto& [name, text] : plan.constants) {
      if (emitted.count(name)) continue;
      bool ready = true;
      for (auto& d : deps[name]) ready = ready && emitted.count(d);
      if (!ready) continue;
      auto e = tr(text);
      if (!e) return error{"constants." + name + ": " + e.message()};
      o << "  const ks_v c_" << ident(name) << " = " << *e << ";\n";
      emitted.insert(name);
      progress = true;
    }
    if (!progress) return error{"constants: a cycle"};
  }
  auto dims_of = [&](const buffer_spec& b, const std::string& where) -> result<std::string> {
    std::string out = "std::vector<int64_t>{";
    for (size_t i = 0; i < b.shape.size(); ++i) {
      auto e = tr(b.shape[i]);
      if (!e) return error{where + ".shape[" + std::to_string(i) + "]: " + e.message()};
      out += (i ? ", " : "") + std::string("ks_in_range(") + *e + ", 0, INT64_MAX, " +
             cpp_string(where + " shape[" + std::to_string(i) + "]") + ")";
    }
    return out + "}";
  };
  for (const auto* list : {&plan.outputs, &plan.scratch})
    for (size_t i = 0; i < list->size(); ++i) {
      const buffer_spec& b = (*list)[i];
      const std::string where = std::string(list == &plan.outputs ? "outputs" : "scratch") + "[" +
                                std::to_string(i) + "] '" + b.name + "'";
      auto shape = dims_of(b, where);
      if (!shape) return error{shape.message()};
      const char* dt = aten_dtype(b.dtype);
      if (!dt) return error{where + ": dtype " + b.dtype + " cannot be exported"};
      o << "  at::Tensor " << var(b.name) << " = at::" << (b.init == "zeros" ? "zeros" : "empty") << "(" << *shape
        << ", options.dtype(" << dt << "));\n";
      available.insert(b.name);
    }
  for (size_t si = 0; si < plan.steps.size(); ++si) {
    const plan_step& s = plan.steps[si];
    const std::string label = "step " + std::to_string(si) + " (" + s.kind + " " + s.name + ")";
    o << "  // " << label << "\n  {\n";
    if (s.kind == "kernel") {
      const kernel_signature* sig = find_kernel(kernels, s.name);
      if (!sig || sig->params.size() != s.args.size()) return error{label + ": the kernel's signature does not fit"};
      const char* axis = "xyz";
      for (int d = 0; d < 3; ++d) {
        std::string g = d < static_cast<int>(s.grid.size()) ? s.grid[d] : "1";
        std::string bl = d < static_cast<int>(s.block.size()) ? s.block[d] : "1";
        auto eg = tr(g);
        if (!eg) return error{label + ": grid[" + std::to_string(d) + "]: " + eg.message()};
        auto eb = tr(bl);
        if (!eb) return error{label + ": block[" + std::to_string(d) + "]: " + eb.message()};
        o << "    const int64_t grid_" << axis[d] << " = ks_in_range(" << *eg << ", 1, "
          << (d == 0 ? "2147483647" : "65535") << ", " << cpp_string(label + " grid[" + std::to_string(d) + "]") << ");\n"
          << "    const int64_t block_" << axis[d] << " = ks_in_range(" << *eb << ", 1, " << (d == 2 ? "64" : "1024")
          << ", " << cpp_string(label + " block[" + std::to_string(d) + "]") << ");\n";
      }
      auto sm = tr(s.shared_mem.empty() ? "0" : s.shared_mem);
      if (!sm) return error{label + ": shared_mem: " + sm.message()};
      o << "    const int64_t smem = ks_in_range(" << *sm << ", 0, 232448, " << cpp_string(label + " shared_mem") << ");\n"
        << "    static int64_t smem_raised = 0;  // the kernel's dynamic shared memory limit, raised as needed\n"
        << "    if (smem > smem_raised) {\n"
        << "      C10_CUDA_CHECK(cudaFuncSetAttribute(" << s.name
        << ", cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));\n"
        << "      smem_raised = smem;\n    }\n";
      std::vector<std::string> args;
      for (size_t i = 0; i < s.args.size(); ++i) {
        const plan_arg& a = s.args[i];
        const kernel_param& p = sig->params[i];
        const std::string where = label + " args[" + std::to_string(i) + "]";
        if (a.kind == "tensor") {
          if (!available.count(a.value)) return error{where + ": tensor '" + a.value + "' is not available here"};
          args.push_back("static_cast<" + pointer_cast_type(p) + ">(" + var(a.value) + ".data_ptr())");
          continue;
        }
        auto e = tr(a.value);
        if (!e) return error{where + ": " + e.message()};
        if (a.type == "int64") args.push_back("static_cast<long long>(ks_int_of(" + *e + ", " + cpp_string(where) + "))");
        else if (a.type == "int32")
          args.push_back("static_cast<int>(ks_in_range(" + *e + ", arg_lo_" + std::to_string(i) + ", 2147483647LL, " +
                         cpp_string(where) + "))");
        else if (a.type == "float32") args.push_back("static_cast<float>(ks_dbl(" + *e + "))");
        else args.push_back("ks_dbl(" + *e + ")");
        if (a.type == "int32")
          o << "    const int64_t arg_lo_" << i << " = " << (p.is_unsigned ? "0" : "-2147483648LL") << ";  // int32"
            << (p.is_unsigned ? " (unsigned)" : "") << "\n";
      }
      o << "    KS_LAUNCH(" << s.name << ", dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), "
        << "static_cast<unsigned>(grid_z)),\n              dim3(static_cast<unsigned>(block_x), "
        << "static_cast<unsigned>(block_y), static_cast<unsigned>(block_z)), smem, stream";
      for (auto& a : args) o << ",\n              " << a;
      o << ");\n    C10_CUDA_KERNEL_LAUNCH_CHECK();\n  }\n";
    } else {
      std::vector<std::string> a, dargs;
      std::vector<bool> is_tensor;
      for (size_t i = 0; i < s.args.size(); ++i) {
        const plan_arg& arg = s.args[i];
        is_tensor.push_back(arg.kind == "tensor");
        if (arg.kind == "tensor") {
          if (!available.count(arg.value)) return error{label + ": tensor '" + arg.value + "' is not available here"};
          a.push_back(var(arg.value));
          dargs.push_back("ks_targ(" + var(arg.value) + ")");
          continue;
        }
        auto e = tr(arg.value);
        if (!e) return error{label + ": args[" + std::to_string(i) + "]: " + e.message()};
        const std::string where = cpp_string(label + " args[" + std::to_string(i) + "]");
        if (arg.kind == "int") {
          a.push_back("at::Scalar(static_cast<int64_t>(ks_int_of(" + *e + ", " + where + ")))");
          dargs.push_back("ks_iarg(ks_int_of(" + *e + ", " + where + "))");
        } else {
          a.push_back("at::Scalar(ks_dbl(" + *e + "))");
          dargs.push_back("ks_farg(ks_dbl(" + *e + "))");
        }
      }
      resolved_step rs;
      rs.index = si;
      rs.kind = s.kind;
      rs.name = s.name;
      rs.attrs = s.attrs;
      std::string pre, call;
      const bool dispatcher = s.attrs.count("schema") > 0;
      if (dispatcher) {
        call = dispatch_call(s.attrs, dargs);
      } else {
        auto c = library_call(rs, a, is_tensor, pre);
        if (!c) return error{label + ": " + c.message()};
        if (s.outputs.size() != 1) return error{label + ": outputs: this op writes one tensor"};
        call = *c;
      }
      if (s.outputs.empty()) return error{label + ": outputs: the step names no result"};
      std::string decls;
      std::set<std::string> declared_before = available;
      std::string block = library_results(
          label, s.outputs, dispatcher, call, pre,
          [&](const std::string& n) { return declared_before.count(n) > 0; }, decls);
      for (auto& out : s.outputs) available.insert(out);
      // The block opened above ("  {") is replaced by this step's own.
      std::string body = o.str();
      size_t open = body.rfind("  {\n");
      body.erase(open);
      o.str(body);
      o.seekp(0, std::ios_base::end);
      o << decls << block;
    }
  }
  o << "  return {";
  for (size_t i = 0; i < plan.outputs.size(); ++i) o << (i ? ", " : "") << var(plan.outputs[i].name);
  o << "};\n}\n";
  return o.str();
}

// ---------------------------------------------------------------------------
// Compile options: NVRTC's (the reviewer's) as nvcc options.

result<std::vector<std::string>> nvcc_options(const std::vector<std::string>& opts) {
  std::vector<std::string> out;
  for (const auto& o : opts) {
    auto starts = [&](const char* p) { return o.rfind(p, 0) == 0; };
    if (starts("-std=") || starts("--std=")) continue;  // PyTorch sets the language standard
    if (starts("-D") || o == "--use_fast_math" || o == "-use_fast_math" || starts("-maxrregcount") ||
        starts("--maxrregcount") || starts("-ftz") || starts("--ftz") || starts("-prec-div") ||
        starts("--prec-div") || starts("-prec-sqrt") || starts("--prec-sqrt") || starts("-fmad") ||
        starts("--fmad") || o == "--extra-device-vectorization" || o == "-extra-device-vectorization") {
      out.push_back(o);
      continue;
    }
    return error{"compile option '" + o + "' has no nvcc equivalent known to the exporter"};
  }
  return out;
}

std::string py_distribution(const distribution_spec& d) {
  return "{\"kind\": " + py_string(d.kind) + ", \"mean\": " + number(d.mean) + ", \"std\": " + number(d.std) +
         ", \"low\": " + number(d.low) + ", \"high\": " + number(d.high) + ", \"value\": " + number(d.value) + "}";
}

}  // namespace

result<pytorch_export> export_pytorch(const task_spec& task, const candidate& best,
                                      const pytorch_export_options& options) {
  const std::string what = "export of task '" + task.name + "'";
  if (task.torchscript.empty() && task.module_bytes.empty())
    return error{what + ": the task has no reference"};
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list)
      if (!aten_dtype(t.dtype)) return error{what + ": tensor '" + t.name + "': dtype " + t.dtype + " cannot be exported"};
  if (task.inputs.empty() && task.parameters.empty())
    return error{what + ": the task has no input tensors (the launcher takes its device from them)"};
  auto nvcc = nvcc_options(best.compile_options);
  if (!nvcc) return error{what + ": " + nvcc.message()};

  // Resolve the plan at the default shapes and at every named size.
  std::vector<size_variant> variants;
  pytorch_export ex;
  std::vector<std::string> names = {""};
  for (auto& [n, _] : task.sizes) names.push_back(n);
  for (const auto& n : names) {
    auto ctx = make_plan_context(task, best.source, n);
    if (!ctx) return error{what + ": " + ctx.message()};
    ctx->limits = options.limits;
    auto r = resolve_plan(best.plan, *ctx);
    const std::string label = n.empty() ? "default" : n;
    if (!r) {
      if (n.empty()) return error{what + ": the launch plan does not resolve at the task's shapes: " + r.message()};
      ex.skipped_sizes.push_back(label + ": " + r.message());
      continue;
    }
    size_variant v{label, {}, std::move(*r)};
    for (const auto* list : {&task.inputs, &task.parameters})
      for (const auto& t : *list) v.shapes.push_back(ctx->inputs.at(t.name).shape);
    bool duplicate = false;
    for (auto& other : variants) duplicate = duplicate || other.shapes == v.shapes;
    if (duplicate) continue;
    variants.push_back(std::move(v));
  }
  for (const auto& v : variants) ex.sizes.push_back(v.name);

  const auto kernels = extract_kernel_signatures(best.source);
  std::set<std::string> launched;
  for (const auto& v : variants)
    for (const auto& s : v.plan.steps)
      if (s.kind == "kernel") launched.insert(s.name);

  // Kernel declarations for a host-compiler check of the launcher.
  for (const auto& name : launched) {
    const kernel_signature* k = find_kernel(kernels, name);
    if (!k) return error{what + ": the plan launches '" + name + "', which the source does not define"};
    ex.kernel_declarations += "extern \"C\" void " + name + "(" + k->params_text() + ");\n";
  }

  // The launcher.
  const size_t n_tensors = task.inputs.size() + task.parameters.size();
  std::ostringstream l;
  l << "// ---------------------------------------------------------------------------\n"
    << "// The launcher, generated by kernelskill export from the launch plan.\n"
    << "#ifndef KS_LAUNCH\n"
    << "#define KS_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)\n"
    << "#endif\n\n";
  bool has_dispatcher_step = false;
  for (const auto& st : best.plan.steps) has_dispatcher_step = has_dispatcher_step || st.attrs.count("schema");
  if (has_dispatcher_step)
    l << "// Dispatcher steps: ATen ops called by their schema, as the reviewer calls them.\n" << dispatch_runtime_text() << "\n";
  auto general = general_function(task, best.plan, kernels);
  if (general) l << "// The expression language at run time (plan/shape_expr.cpp's rules).\n" << expr_runtime_text() << "\n";
  else ex.general_launcher_note = general.message();
  l << "namespace {\n\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    auto fn = size_function(task, variants[i], kernels, "ks_run_" + ident(variants[i].name));
    if (!fn) return error{what + ", size " + variants[i].name + ": " + fn.message()};
    l << *fn << "\n";
  }
  if (general) l << *general << "\n";
  l << "bool ks_shapes_are(const std::vector<at::Tensor>& in, const std::vector<std::vector<int64_t>>& shapes) {\n"
    << "  for (size_t i = 0; i < in.size(); ++i)\n"
    << "    if (in[i].sizes() != at::IntArrayRef(shapes[i])) return false;\n"
    << "  return true;\n}\n\n"
    << "}  // namespace\n\n";
  // Names and dtypes, for messages.
  std::vector<std::string> tensor_names;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) tensor_names.push_back(t.name);
  std::string supported;
  for (const auto& v : variants) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < v.shapes.size(); ++i) parts.push_back(tensor_names[i] + " " + shape_list(v.shapes[i]));
    supported += (supported.empty() ? "" : "; ") + v.name + ": " + join(parts, ", ");
  }
  const std::string who = "ModelNew (task " + task.name + ")";
  l << "// The task's inputs, then its parameters, in the reference's order.\n"
    << "// general: skip the size-specialised launchers (to check the general one).\n"
    << "std::vector<at::Tensor> ks_forward(const std::vector<at::Tensor>& tensors, bool general) {\n"
    << "  TORCH_CHECK(tensors.size() == " << n_tensors << ", "
    << cpp_string(who + ": expected " + std::to_string(n_tensors) + " tensors (" + join(tensor_names, ", ") + "), got ")
    << ", tensors.size());\n"
    << "  std::vector<at::Tensor> in;\n";
  size_t k = 0;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) {
      std::string i = std::to_string(k++);
      l << "  TORCH_CHECK(tensors[" << i << "].is_cuda(), " << cpp_string(who + ": " + t.name + " must be a CUDA tensor") << ");\n"
        << "  TORCH_CHECK(tensors[" << i << "].scalar_type() == " << aten_dtype(t.dtype) << ", "
        << cpp_string(who + ": " + t.name + " must be " + t.dtype + ", got ") << ", tensors[" << i << "].scalar_type());\n"
        << (k == 1 ? std::string()
                   : "  TORCH_CHECK(tensors[" + i + "].device() == tensors[0].device(), " +
                         cpp_string(who + ": " + t.name + " is on another device than " + tensor_names[0]) + ");\n")
        << "  in.push_back(tensors[" << i << "].contiguous());\n";
    }
  l << "  const c10::cuda::CUDAGuard guard(in[0].device());\n";
  for (const auto& v : variants) {
    std::string list = "std::vector<std::vector<int64_t>>{";
    for (size_t i = 0; i < v.shapes.size(); ++i)
      list += (i ? ", " : "") + std::string("std::vector<int64_t>") + shape_list(v.shapes[i], "{", "}");
    list += "}";
    l << "  if (!general && ks_shapes_are(in, " << list << ")) return ks_run_" << ident(v.name) << "(in);\n";
  }
  if (general) {
    l << "  return ks_run_general(in);\n}\n";
  } else {
  l << "  std::string got;\n"
    << "  for (size_t i = 0; i < in.size(); ++i) {\n"
    << "    got += i ? \", \" : \"\";\n"
    << "    got += std::to_string(in[i].dim()) + \"-d [\";\n"
    << "    for (int64_t d = 0; d < in[i].dim(); ++d) got += (d ? \", \" : \"\") + std::to_string(in[i].size(d));\n"
    << "    got += \"]\";\n  }\n"
    << "  TORCH_CHECK(false, "
    << cpp_string(who + ": the launch plan was resolved at export time for these shapes only: " + supported +
                  "; got ")
    << ", got, \". Add the size to the task's sizes: and export again.\");\n"
    << "  return {};\n}\n";
  }
  ex.launcher = l.str();

  ex.cpp_source = "std::vector<at::Tensor> ks_forward(const std::vector<at::Tensor>& tensors, bool general);\n";
  ex.cuda_source =
      "// CUDA source of KernelSkill task '" + task.name + "', candidate " +
      (best.id.empty() ? std::string("(no id)") : best.id) + ".\n" +
      "// load_inline puts torch/types.h, cuda.h and cuda_runtime.h before this.\n"
      "#include <ATen/cuda/CUDAContext.h>\n"
      "#include <c10/cuda/CUDAGuard.h>\n"
      "#include <c10/cuda/CUDAException.h>\n"
      "#include <ATen/core/dispatch/Dispatcher.h>\n"
      "#include <ATen/core/stack.h>\n"
      "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n#include <map>\n"
      "#include <optional>\n#include <stdexcept>\n#include <string>\n#include <vector>\n\n"
      "// ---------------------------------------------------------------------------\n"
      "// The candidate's device code, as reviewed.\n" +
      best.source + (best.source.empty() || best.source.back() == '\n' ? "" : "\n") + "\n" + ex.launcher;
  ex.module_name = "ks_" + ident(task.name) + "_" + sha256_hex(ex.cuda_source + join(*nvcc, " ")).substr(0, 12);
  ex.nvcc_options = *nvcc;

  // The Python file.
  std::ostringstream p;
  p << "# ModelNew for KernelSkill task '" << task.name << "', written by `kernelskill export`.\n"
    << "# Candidate " << (best.id.empty() ? std::string("(no id)") : best.id)
    << (best.origin.empty() ? std::string() : ", " + best.origin) << ".\n"
    << "\"\"\"The kernel KernelSkill found for task " << py_string(task.name).substr(1, py_string(task.name).size() - 2)
    << ", as a PyTorch module.\n\n"
    << "    model = ModelNew().cuda()             # the task's parameters, drawn as the task says\n"
    << "    y = model(*get_inputs())              # builds the extension on first use (nvcc)\n\n"
    << "forward() takes the task's inputs; the parameters are module parameters, in the\n"
    << "reference's order in model.task_parameters(). Inputs of the shapes of these sizes: "
    << join(ex.sizes, ", ") << "\n"
    << "(see SIZES) run a launcher specialised at export time; "
    << (ex.general_launcher_note.empty() ? "other shapes run one that evaluates\nthe launch plan at run time.\n"
                                         : "other shapes raise a RuntimeError.\n")
    << "\"\"\"\n"
    << "import math\n\nimport torch\nfrom torch.utils.cpp_extension import load_inline\n\n"
    << "TASK = " << py_string(task.name) << "\n"
    << "CANDIDATE = " << py_string(best.id) << "\n"
    << "MODULE_NAME = " << py_string(ex.module_name) << "\n"
    << "# (name, dtype, init) of each input, then of each parameter, in the reference's order.\n"
    << "INPUTS = [\n";
  for (auto& t : task.inputs) p << "    (" << py_string(t.name) << ", " << py_string(t.dtype) << ", " << py_distribution(t.init) << "),\n";
  p << "]\nPARAMETERS = [\n";
  for (auto& t : task.parameters) p << "    (" << py_string(t.name) << ", " << py_string(t.dtype) << ", " << py_distribution(t.init) << "),\n";
  p << "]\n# The shapes the launcher runs at: size -> shape of each input, then each parameter.\nSIZES = {\n";
  for (const auto& v : variants) {
    p << "    " << py_string(v.name) << ": [";
    for (size_t i = 0; i < v.shapes.size(); ++i) p << (i ? ", " : "") << shape_list(v.shapes[i]);
    p << "],\n";
  }
  p << "}\n";
  if (!ex.skipped_sizes.empty()) {
    p << "# Sizes of the task the plan does not resolve at, left out:\n";
    for (auto& s : ex.skipped_sizes) p << "#   " << s << "\n";
  }
  p << "# Other shapes go to a launcher that evaluates the plan's expressions at run time.\n"
    << "GENERAL_LAUNCHER = " << (ex.general_launcher_note.empty() ? "True" : "False") << "\n"
    << "GENERAL_NOTE = " << py_string(ex.general_launcher_note) << "\n";
  p << "TOLERANCE = {\"atol\": " << number(task.tolerance.atol) << ", \"rtol\": " << number(task.tolerance.rtol) << "}\n"
    << "SEED = " << task.seed << "\n"
    << "NVCC_OPTIONS = [" << [&] {
         std::vector<std::string> q;
         for (auto& o : ex.nvcc_options) q.push_back(py_string(o));
         return join(q, ", ");
       }() << "]\n\n"
    << "CPP_SOURCE = " << py_string(ex.cpp_source) << "\n\n"
    << "CUDA_SOURCE = " << py_block_string(ex.cuda_source) << "\n\n";
  p << R"PY(_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float64": torch.float64, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
_extension = None


def load_extension(build_directory=None, verbose=False):
    """Builds (first call) and returns the extension: ks_forward(list of tensors)."""
    global _extension
    if _extension is None:
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}{'a' if major >= 9 else ''}"  # as the reviewer compiles: sm_90a on H100/H200
        _extension = load_inline(
            name=MODULE_NAME, cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE, functions=["ks_forward"],
            extra_cuda_cflags=["-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}"] + NVCC_OPTIONS,
            build_directory=build_directory, verbose=verbose)
    return _extension


def _draw(shape, dtype, init, generator, device):
    """A tensor drawn as a task's init says (normal, uniform, randint, constant, zeros, ones,
    arange, kaiming_uniform)."""
    dtype = _DTYPES[dtype]
    draw = torch.float64 if dtype == torch.float64 else torch.float32 if dtype.is_floating_point else torch.int64
    kind = init["kind"]
    if kind == "normal":
        t = torch.empty(shape, dtype=draw, device=device).normal_(init["mean"], init["std"], generator=generator)
    elif kind == "uniform":
        t = torch.empty(shape, dtype=draw, device=device).uniform_(init["low"], init["high"], generator=generator)
    elif kind == "randint":
        t = torch.empty(shape, dtype=draw, device=device).random_(int(init["low"]), int(init["high"]), generator=generator)
    elif kind == "constant":
        t = torch.full(shape, init["value"], dtype=draw, device=device)
    elif kind == "zeros":
        t = torch.zeros(shape, dtype=draw, device=device)
    elif kind == "ones":
        t = torch.ones(shape, dtype=draw, device=device)
    elif kind == "arange":
        t = torch.arange(math.prod(shape), dtype=draw, device=device).reshape(shape)
    elif kind == "kaiming_uniform":
        bound = 1.0 / math.sqrt(math.prod(shape[1:]))
        t = torch.empty(shape, dtype=draw, device=device).uniform_(-bound, bound, generator=generator)
    else:
        raise ValueError(f"unknown init kind {kind!r}")
    return t.to(dtype)


def _attribute(name):
    return name if name.isidentifier() and not hasattr(torch.nn.Module, name) else "param_" + name


class ModelNew(torch.nn.Module):
    """The task's reference, computed by KernelSkill's kernel. forward(*inputs)."""

    def __init__(self, size="default", seed=SEED, parameter_shapes=None):
        """The parameters' shapes are those of `size`, or `parameter_shapes` (a list, in
        PARAMETERS' order) for other shapes (served by the general-shape launcher)."""
        super().__init__()
        if parameter_shapes is None and size not in SIZES:
            raise ValueError(f"size {size!r}: this export has {', '.join(SIZES)}; or give parameter_shapes")
        generator = torch.Generator().manual_seed(seed)
        shapes = parameter_shapes if parameter_shapes is not None else SIZES[size][len(INPUTS):]
        self._names = []
        for (name, dtype, init), shape in zip(PARAMETERS, shapes):
            value = _draw(shape, dtype, init, generator, "cpu")
            attr = _attribute(name)
            if value.is_floating_point():
                self.register_parameter(attr, torch.nn.Parameter(value, requires_grad=False))
            else:
                self.register_buffer(attr, value)
            self._names.append(attr)

    def task_parameters(self):
        """The parameters in the order the reference's forward() takes them after the inputs."""
        return [getattr(self, a) for a in self._names]

    def forward(self, *inputs):
        if len(inputs) != len(INPUTS):
            raise TypeError(f"ModelNew (task {TASK}) takes {len(INPUTS)} inputs "
                            f"({', '.join(n for n, _, _ in INPUTS)}), got {len(inputs)}")
        outputs = load_extension().ks_forward(list(inputs) + self.task_parameters(), False)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def forward_general(self, *inputs):
        """forward() through the general-shape launcher even at the exported sizes (which
        forward() serves with launchers specialised at export time): to check it."""
        if not GENERAL_LAUNCHER:
            raise RuntimeError(f"ModelNew (task {TASK}): no general-shape launcher in this export: {GENERAL_NOTE}")
        outputs = load_extension().ks_forward(list(inputs) + self.task_parameters(), True)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def get_inputs(size="default", seed=0, device="cuda"):
    """The task's inputs at `size`, drawn on `device` as the task says."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return [_draw(shape, dtype, init, generator, device)
            for (name, dtype, init), shape in zip(INPUTS, SIZES[size][:len(INPUTS)])]


def get_init_inputs():
    return []
)PY";
  ex.python = p.str();
  return ex;
}

namespace export_detail {

const std::string& expression_runtime() { return expr_runtime_text(); }
const std::string& dispatch_runtime() { return dispatch_runtime_text(); }

result<std::string> translate_expression(const std::string& text, const std::set<std::string>& constants,
                                         const std::set<std::string>& tensors) {
  return expr_translator(text, constants, [&](const std::string& n) {
           return tensors.count(n) ? var(n) : std::string();
         }).run();
}

}  // namespace export_detail

result<std::string> pytorch_module_source(const task_spec& task, const candidate& best) {
  auto ex = export_pytorch(task, best);
  if (!ex) return error{ex.message()};
  return std::move(ex->python);
}

}  // namespace ks
