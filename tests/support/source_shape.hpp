#pragma once
// The shape of a C++ source file, for tests/layering_test.cpp: its functions and how
// many lines each spans (nested lambdas and local classes count towards the function
// that holds them). A lexer, not a parser: comments, string, character and raw string
// literals are blanked first, then braces are matched; a brace opens a function body
// when it stands at namespace or class scope right after a parameter list (with
// const, noexcept, override, final, mutable or a trailing return type between).

#include <regex>
#include <string>
#include <vector>

namespace ks::test {

struct function_span {
  std::string head;  // the text before the body's brace, trimmed to its last line
  int first_line = 0;
  int last_line = 0;
  int lines() const { return last_line - first_line + 1; }
};

// Comments and the contents of literals replaced by spaces; newlines kept.
inline std::string blank_literals(const std::string& s) {
  std::string out = s;
  size_t i = 0, n = s.size();
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  while (i < n) {
    if (s.compare(i, 2, "//") == 0) {
      size_t e = s.find('\n', i);
      if (e == std::string::npos) e = n;
      blank(i, e);
      i = e;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t e = s.find("*/", i + 2);
      e = e == std::string::npos ? n : e + 2;
      blank(i, e);
      i = e;
    } else if (s[i] == 'R' && i + 1 < n && s[i + 1] == '"' &&
               (i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_'))) {
      size_t open = s.find('(', i + 2);
      if (open == std::string::npos) break;
      std::string delim = ")" + s.substr(i + 2, open - i - 2) + "\"";
      size_t e = s.find(delim, open);
      e = e == std::string::npos ? n : e + delim.size();
      blank(i + 1, e);
      i = e;
    } else if (s[i] == '"' || s[i] == '\'') {
      // A digit separator (1'000) is not a character literal.
      if (s[i] == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1]))) {
        ++i;
        continue;
      }
      char q = s[i];
      size_t k = i + 1;
      while (k < n && s[k] != q && s[k] != '\n') k += s[k] == '\\' ? 2 : 1;
      blank(i + 1, k);
      i = k + 1;
    } else {
      ++i;
    }
  }
  return out;
}

inline std::vector<function_span> function_spans(const std::string& source) {
  static const std::regex function_head(R"(\)\s*((const|noexcept|override|final|mutable)\s*)*(->\s*[\w:<>,\s\*&]+)?$)");
  static const std::regex scope_head(R"((^|\s)(namespace|class|struct|union|enum)(\s|$))");
  enum kind { scope, function, other };
  struct open_brace {
    kind k;
    size_t function_index;
  };
  std::string s = blank_literals(source);
  std::vector<function_span> out;
  std::vector<open_brace> stack;
  size_t statement_start = 0;
  int line = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\n') ++line;
    if (c == ';') statement_start = i + 1;
    if (c == '{') {
      bool at_scope = true;
      for (const auto& b : stack) at_scope = at_scope && b.k == scope;
      std::string head = s.substr(statement_start, i - statement_start);
      size_t end = head.find_last_not_of(" \t\n");
      head = end == std::string::npos ? "" : head.substr(0, end + 1);
      kind k = other;
      if (at_scope && std::regex_search(head, scope_head) && head.find('(') == std::string::npos) {
        k = scope;
      } else if (at_scope && head.find("extern \"") != std::string::npos) {
        k = scope;
      } else if (at_scope && std::regex_search(head, function_head)) {
        k = function;
      }
      size_t index = out.size();
      if (k == function) {
        size_t nl = head.rfind('\n');
        std::string last = nl == std::string::npos ? head : head.substr(nl + 1);
        size_t b = last.find_first_not_of(" \t");
        out.push_back({b == std::string::npos ? last : last.substr(b), line, line});
      }
      stack.push_back({k, index});
      statement_start = i + 1;
    } else if (c == '}') {
      if (!stack.empty()) {
        if (stack.back().k == function) out[stack.back().function_index].last_line = line;
        stack.pop_back();
      }
      statement_start = i + 1;
    }
  }
  return out;
}

inline int line_count(const std::string& source) {
  int n = 0;
  for (char c : source) n += c == '\n';
  return n + (!source.empty() && source.back() != '\n');
}

}  // namespace ks::test
