#include "plan/op_schema.hpp"

namespace ks {

namespace {

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// Splits at the commas outside (), [] and quotes.
std::vector<std::string> split_top(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(' || c == '[') {
      ++depth;
    } else if (c == ')' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string last = trim(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

// The type with its alias annotations removed: "Tensor(a!)" → "Tensor".
std::string plain_type(const std::string& type) {
  std::string out;
  int depth = 0;
  for (char c : type) {
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if (depth == 0)
      out += c;
  }
  return out;
}

}  // namespace

bool op_schema_arg::is_tensor() const {
  std::string t = plain_type(type);
  return t == "Tensor" || t == "Tensor?";
}

bool op_schema_arg::is_tensor_list() const {
  std::string t = plain_type(type);
  return t.rfind("Tensor[", 0) == 0 || t.rfind("Tensor?[", 0) == 0;
}

bool op_schema_arg::is_optional() const {
  std::string t = plain_type(type);
  return !t.empty() && t.back() == '?';
}

const op_schema_arg* op_schema::find(std::string_view arg_name) const {
  for (auto& a : args)
    if (a.name == arg_name) return &a;
  return nullptr;
}

result<op_schema> parse_op_schema(std::string_view text) {
  const std::string where = "schema \"" + std::string(text) + "\": ";
  size_t open = text.find('(');
  if (open == std::string_view::npos) return error{where + "no argument list"};
  int depth = 0;
  size_t close = std::string_view::npos;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(')
      ++depth;
    else if (text[i] == ')' && --depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string_view::npos) return error{where + "'(' is never closed"};
  op_schema s;
  std::string head = trim(text.substr(0, open));
  size_t sep = head.find("::");
  if (sep == std::string::npos) return error{where + "the name has no namespace (aten::NAME)"};
  size_t dot = head.find('.', sep);
  s.name = head.substr(0, dot);
  if (dot != std::string::npos) s.overload = head.substr(dot + 1);
  bool kwarg = false;
  for (const std::string& a : split_top(text.substr(open + 1, close - open - 1))) {
    if (a.empty()) return error{where + "an empty argument"};
    if (a == "*") {
      kwarg = true;
      continue;
    }
    op_schema_arg arg;
    arg.kwarg_only = kwarg;
    std::string decl = a;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      arg.has_default = true;
      arg.default_value = trim(a.substr(eq + 1));
      decl = trim(a.substr(0, eq));
    }
    size_t space = decl.find_last_of(' ');
    if (space == std::string::npos) return error{where + "argument '" + a + "' has no name"};
    arg.type = trim(decl.substr(0, space));
    arg.name = trim(decl.substr(space + 1));
    s.args.push_back(arg);
  }
  std::string rest = trim(text.substr(close + 1));
  if (rest.rfind("->", 0) == 0) {
    std::string r = trim(rest.substr(2));
    if (!r.empty() && r.front() == '(' && r.back() == ')') r = r.substr(1, r.size() - 2);
    for (const std::string& ret : split_top(r)) {
      if (ret.empty()) continue;
      // "Tensor values" → "Tensor"; "Tensor(a)" stays a tensor.
      std::string t = ret;
      int d = 0;
      for (size_t i = 0; i < ret.size(); ++i) {
        if (ret[i] == '(' || ret[i] == '[')
          ++d;
        else if (ret[i] == ')' || ret[i] == ']')
          --d;
        else if (ret[i] == ' ' && d == 0) {
          t = ret.substr(0, i);
          break;
        }
      }
      s.returns.push_back(plain_type(t));
    }
  }
  return s;
}

}  // namespace ks
