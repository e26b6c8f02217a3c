#include "coder/rules/text/kernel_text.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace ks::rules {

namespace {

// The forms a chain reads tensor parameter `p` at index `i` in: plain, or with a
// cache hint (see chain_code).
std::vector<std::string> read_forms(const std::string& p, const std::string& i) {
  return {p + "[" + i + "]", "__ldcs(" + p + " + " + i + ")", "__ldg(" + p + " + (" + i + "))"};
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

bool reads_at(const std::string& code, const std::string& p, const std::string& i) {
  for (const std::string& form : read_forms(p, i))
    for (size_t pos = code.find(form); pos != std::string::npos; pos = code.find(form, pos + form.size()))
      if (pos == 0 || !ident_char(code[pos - 1])) return true;
  return false;
}

std::string flit(double v) {
  if (std::isnan(v)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return "(" + s + "f)";
}

std::string kernel_name(size_t i, const std::string& what) { return "ks" + std::to_string(i) + "_" + what; }

std::string kernel_params::tensor_in(const std::string& tensor, const std::string& ctype) {
  auto it = tensor_param.find(tensor);
  if (it != tensor_param.end()) return it->second;
  // A bool tensor is "m<k>": what looks for the float inputs "in<k>" (vector loads,
  // row caches) leaves it to the chain's own byte loads.
  std::string p = (ctype == "bool" ? "m" : "in") + std::to_string(tensor_param.size());
  tensor_param[tensor] = p;
  decls.push_back("const " + ctype + "* __restrict__ " + p);
  args.push_back({"tensor", tensor, ""});
  return p;
}

std::string kernel_params::tensor_out(const std::string& tensor, const std::string& ctype) {
  std::string p = "out" + std::to_string(decls.size());
  tensor_param[tensor] = p;
  decls.push_back(ctype + "* __restrict__ " + p);
  args.push_back({"tensor", tensor, ""});
  return p;
}

std::string kernel_params::int64(const std::string& expr) {
  auto it = int_param.find(expr);
  if (it != int_param.end()) return it->second;
  std::string p = "n" + std::to_string(decls.size());
  int_param[expr] = p;
  decls.push_back("long long " + p);
  args.push_back({"int", expr, "int64"});
  return p;
}

std::string kernel_params::float32(const std::string& expr) {
  auto it = int_param.find("float:" + expr);
  if (it != int_param.end()) return it->second;
  std::string p = "f" + std::to_string(decls.size());
  int_param["float:" + expr] = p;
  decls.push_back("float " + p);
  args.push_back({"float", expr, "float32"});
  return p;
}

}  // namespace ks::rules
