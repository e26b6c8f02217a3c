#include "export/library_steps.hpp"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "export/source_text.hpp"
#include "plan/attr_parse.hpp"

namespace ks::export_detail {

namespace {

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

// The at:: expression for a library step, given its arguments as C++ expressions
// (tensors: a variable; numbers: an at::Scalar). `pre` receives declarations the call
// needs (integer lists for conv2d).
result<std::string> library_call(const resolved_step& s, const std::vector<std::string>& a,
                                 const std::vector<bool>& is_tensor, std::string& pre) {
  std::string op = s.name.substr(0, s.name.find('.'));  // aten::add.Tensor → aten::add
  auto nargs = [&](size_t lo, size_t hi) -> status {
    if (a.size() < lo || a.size() > hi)
      return error{"args: " + op + " takes " +
                   (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)) +
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
  // attrs.math tf32: cuBLAS may use TF32 for this call (gpu/matmul_precision.hpp, in the module).
  auto product = [&](const std::string& call) -> result<std::string> {
    auto math = choice_attr(s.attrs, "math", "ieee", {"ieee", "tf32"});
    if (!math) return error{math.message()};
    return *math == "tf32" ? "ks::matmul_precision::with_tf32([&] { return " + call + "; })" : call;
  };
  if (op == "aten::matmul" || op == "aten::mm" || op == "aten::bmm") {
    if (auto st = both(2, 2, 2); !st) return error{st.message()};
    return product("at::" + op.substr(6) + "(" + a[0] + ", " + a[1] + ")");
  }
  if (op == "aten::addmm") {
    if (auto st = both(3, 3, 3); !st) return error{st.message()};
    auto beta = scalar_attr(s.attrs, "beta", "at::Scalar(1.0)");
    if (!beta) return error{beta.message()};
    auto alpha = scalar_attr(s.attrs, "alpha", "at::Scalar(1.0)");
    if (!alpha) return error{alpha.message()};
    return product("at::addmm(" + a[0] + ", " + a[1] + ", " + a[2] + ", " + *beta + ", " + *alpha + ")");
  }
  if (op == "aten::linear") {
    if (auto st = both(2, 3, a.size()); !st) return error{st.message()};
    return product("at::linear(" + a[0] + ", " + a[1] + (a.size() > 2 ? ", " + a[2] : std::string()) + ")");
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
    // memory_format channels_last: input and weight converted first (as the reviewer runs it).
    std::string x = a[0], w = a[1];
    if (auto mf = s.attrs.find("memory_format"); mf != s.attrs.end() && trim_blanks(mf->second) == "channels_last") {
      x += ".contiguous(at::MemoryFormat::ChannelsLast)";
      w += ".contiguous(at::MemoryFormat::ChannelsLast)";
    } else if (mf != s.attrs.end() && trim_blanks(mf->second) != "contiguous") {
      return error{"attrs.memory_format: expected contiguous or channels_last, got " + cpp_string(mf->second)};
    }
    std::string head = "at::conv2d(" + x + ", " + w + ", " + bias + ", at::IntArrayRef(" + v + "stride), ";
    std::string tail =
        ", at::IntArrayRef(" + v + "dilation), static_cast<int64_t>(" + std::to_string((*groups)[0]) + "))";
    // result_layout nhwc: handed on as [N, H, W, C] (a channels-last result as it lies).
    if (auto rl = s.attrs.find("result_layout"); rl != s.attrs.end() && trim_blanks(rl->second) == "nhwc")
      tail += ".permute({0, 2, 3, 1})";
    else if (rl != s.attrs.end() && trim_blanks(rl->second) != "nchw")
      return error{"attrs.result_layout: expected nchw or nhwc, got " + cpp_string(rl->second)};
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
  static const std::set<std::string> unary = {"relu", "sigmoid", "tanh",  "exp",  "log", "neg",
                                              "abs",  "sqrt",    "rsqrt", "silu", "sin", "cos"};
  if (op.rfind("aten::", 0) == 0 && unary.count(op.substr(6))) {
    if (auto st = both(1, 1, 1); !st) return error{st.message()};
    return "at::" + op.substr(6) + "(" + a[0] + ")";
  }
  return error{op +
               " has no at:: counterpart in the exporter (it exports the ops the reviewer runs: "
               "aten::matmul mm bmm addmm linear conv2d add sub mul div softmax log_softmax gelu "
               "relu sigmoid tanh exp log neg abs sqrt rsqrt silu sin cos)"};
}

// The dispatcher call of a step with attrs.schema: prepared once, on the module's first
// call (a function-local static: the operator found and its attributes parsed once, not
// per call), then called with its arguments as ks_arg expressions. `v` names the
// step's variables; `pre` receives their declarations.
std::string dispatch_call(const std::map<std::string, std::string>& attrs, const std::vector<std::string>& args,
                          const std::string& v, std::string& pre) {
  std::string m = "std::map<std::string, std::string>{";
  bool first = true;
  for (auto& [k, val] : attrs) {
    m += std::string(first ? "" : ", ") + "{" + cpp_string(k) + ", " + cpp_string(val) + "}";
    first = false;
  }
  m += "}";
  pre += "    const std::vector<ks_arg> " + v + "args{" + join(args, ", ") + "};\n";
  pre += "    static const ks_prepared_step " + v + "op = ks_prepare_by_schema(" + m + ", " + v + "args);\n";
  return "ks_call_prepared(" + v + "op, " + v + "args, in[0].device())";
}

}  // namespace

std::string library_results(const std::string& label, const std::vector<std::string>& outputs,
                            const library_step_call& c, const std::function<result_target(const std::string&)>& target,
                            const std::vector<std::string>& operands, std::string& decls) {
  std::ostringstream o;
  o << "  {\n" << c.pre;
  o << "    const std::vector<at::Tensor> r = " << (c.dispatcher ? c.call : "{" + c.call + "}") << ";\n"
    << "    TORCH_CHECK(r.size() >= " << outputs.size() << ", "
    << cpp_string(label + ": the op returned fewer tensors than the step names (" + std::to_string(outputs.size()) +
                  ")")
    << ");\n";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string& out = outputs[k];
    const result_target to = target(out);
    if (to == result_target::library_scratch || to == result_target::buffer)
      o << "    TORCH_CHECK(r[" << k << "].sizes() == " << var(out) << ".sizes() && r[" << k
        << "].scalar_type() == " << var(out) << ".scalar_type(), "
        << cpp_string(label + ": the op's result does not match the declared buffer '" + out + "'") << ");\n";
    if (to == result_target::library_scratch) {
      o << "    " << var(out) << " = r[" << k << "];  // scratch only library steps use: as the op returned it\n";
    } else if (to == result_target::buffer) {
      o << "    if (ks::result_adoption::adoptable(r, " << k << ", " << var(out) << ", {";
      bool first = true;
      std::set<std::string> listed;
      for (const std::string& t : operands) {
        if (t == out || !listed.insert(t).second) continue;
        o << (first ? "" : ", ") << "&" << var(t);
        first = false;
      }
      o << "})) " << var(out) << " = r[" << k << "];\n"
        << "    else " << var(out) << ".copy_(r[" << k << "]);\n";
    } else {
      decls += "  at::Tensor " + var(out) + ";\n";
      o << "    " << var(out) << " = r[" << k << "]"
        << (to == result_target::kernel_intermediate ? ".contiguous()" : "") << ";\n";
    }
  }
  o << "  }\n";
  return o.str();
}

result<library_step_call> library_step(const std::string& label, const resolved_step& s,
                                       const std::vector<std::string>& outputs, const std::vector<std::string>& args,
                                       const std::vector<std::string>& dispatch_args,
                                       const std::vector<bool>& is_tensor) {
  library_step_call c;
  c.dispatcher = s.attrs.count("schema") > 0;
  if (c.dispatcher) {
    c.call = dispatch_call(s.attrs, dispatch_args, "s" + std::to_string(s.index) + "_", c.pre);
  } else {
    auto call = library_call(s, args, is_tensor, c.pre);
    if (!call) return error{label + ": " + call.message()};
    if (outputs.size() != 1) return error{label + ": outputs: this op writes one tensor"};
    c.call = *call;
  }
  if (outputs.empty()) return error{label + ": outputs: the step names no result"};
  return c;
}

}  // namespace ks::export_detail
