#include "export/source_text.hpp"

#include <cctype>
#include <cstdio>

#include "plan/attr_parse.hpp"

namespace ks::export_detail {

// A C++ string literal.
std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

// A one-line Python string literal.
std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
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
    if (c == '\\')
      out += "\\\\";
    else if (c == '"' && (i + 1 == s.size() || s[i + 1] == '"'))
      out += "\\\"";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
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

std::string ident(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

std::string shape_list(const std::vector<int64_t>& shape, const char* open, const char* close) {
  std::string s = open;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + close;
}

std::string var(const std::string& tensor) { return "t_" + ident(tensor); }

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

}  // namespace ks::export_detail
