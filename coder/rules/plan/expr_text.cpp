#include "coder/rules/plan/expr_text.hpp"

#include <cctype>

namespace ks::rules {

bool is_simple(const std::string& e) {
  for (char c : e)
    if (c == ' ' || c == '+' || c == '-' || c == '*' || c == '/' || c == '%') return false;
  return true;
}

std::string paren(const std::string& e) { return is_simple(e) ? e : "(" + e + ")"; }

std::string product(const std::vector<std::string>& dims) {
  std::vector<std::string> f;
  for (auto& d : dims)
    if (d != "1") f.push_back(paren(d));
  return f.empty() ? "1" : join(f, " * ");
}

std::string ident(const std::string& value_id) {
  std::string s = "v";
  for (char c : value_id) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

std::string base_kind(const std::string& kind) {
  std::string k = kind;
  if (k.size() > 1 && k.back() == '_' && k.rfind("aten::", 0) == 0 && k != "aten::_") k.pop_back();
  return k;
}

}  // namespace ks::rules
