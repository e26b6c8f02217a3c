#include "features/cuda_lexer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ks::features {

namespace {

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

const char* const punct3[] = {"<<=", ">>=", "...", "->*"};
const char* const punct2[] = {"<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "+=",
                              "-=", "*=", "/=", "%=", "&=", "|=", "^=", "->", "::", "##"};

// Lexes `s` (code only: no preprocessor handling) and appends to `out`.
void lex_code(std::string_view s, int line, std::vector<token>& out);

// The body of a preprocessor line, with continuations joined and comments removed.
struct pp_line {
  std::string text;
  int first_line = 0;
};

}  // namespace

bool parse_int_literal(std::string_view text, long long& value) {
  if (text.empty() || !digit(text[0])) return false;
  std::string t(text);
  // Strip integer suffixes.
  while (!t.empty() && (t.back() == 'u' || t.back() == 'U' || t.back() == 'l' || t.back() == 'L')) t.pop_back();
  if (t.empty()) return false;
  for (char c : t)
    if (c == '.' || c == 'p' || c == 'P') return false;
  bool hex = t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
  if (!hex)
    for (char c : t)
      if (c == 'e' || c == 'E' || c == 'f' || c == 'F') return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 0);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  value = v;
  return true;
}

bool parse_number_literal(std::string_view text, double& value) {
  long long i = 0;
  if (parse_int_literal(text, i)) {
    value = static_cast<double>(i);
    return true;
  }
  if (text.empty() || !(digit(text[0]) || text[0] == '.')) return false;
  std::string t(text);
  while (!t.empty() && (t.back() == 'f' || t.back() == 'F' || t.back() == 'l' || t.back() == 'L')) t.pop_back();
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == nullptr || *end != '\0') return false;
  value = v;
  return true;
}

namespace {

void lex_code(std::string_view s, int line, std::vector<token>& out) {
  size_t p = 0;
  while (p < s.size()) {
    char c = s[p];
    if (c == '\n') {
      ++line;
      ++p;
      continue;
    }
    if (space(c)) {
      ++p;
      continue;
    }
    if (c == '/' && p + 1 < s.size() && s[p + 1] == '/') {
      while (p < s.size() && s[p] != '\n') ++p;
      continue;
    }
    if (c == '/' && p + 1 < s.size() && s[p + 1] == '*') {
      p += 2;
      while (p < s.size() && !(s[p] == '*' && p + 1 < s.size() && s[p + 1] == '/')) {
        if (s[p] == '\n') ++line;
        ++p;
      }
      p = p + 2 <= s.size() ? p + 2 : s.size();
      continue;
    }
    if (c == '"' || c == '\'') {
      // A string or character literal (prefixes such as u8 are lexed as identifiers
      // in front of it, which is harmless).
      char q = c;
      int start_line = line;
      std::string text;
      ++p;
      while (p < s.size() && s[p] != q) {
        if (s[p] == '\\' && p + 1 < s.size()) {
          text += s[p];
          text += s[p + 1];
          if (s[p + 1] == '\n') ++line;
          p += 2;
          continue;
        }
        if (s[p] == '\n') {  // unterminated: stop at the end of the line
          break;
        }
        text += s[p++];
      }
      if (p < s.size() && s[p] == q) ++p;
      out.push_back({tok_kind::string, std::move(text), start_line});
      continue;
    }
    if (ident_start(c)) {
      size_t b = p;
      while (p < s.size() && ident_char(s[p])) ++p;
      out.push_back({tok_kind::ident, std::string(s.substr(b, p - b)), line});
      continue;
    }
    if (digit(c) || (c == '.' && p + 1 < s.size() && digit(s[p + 1]))) {
      size_t b = p;
      while (p < s.size()) {
        char d = s[p];
        if (ident_char(d) || d == '.') {
          ++p;
        } else if ((d == '+' || d == '-') && p > b &&
                   (s[p - 1] == 'e' || s[p - 1] == 'E' || s[p - 1] == 'p' || s[p - 1] == 'P') &&
                   !(s.substr(b, 2) == "0x" || s.substr(b, 2) == "0X")) {
          ++p;
        } else if ((d == '+' || d == '-') && p > b && (s[p - 1] == 'p' || s[p - 1] == 'P')) {
          ++p;  // hexadecimal float exponent
        } else if (d == '\'' && p + 1 < s.size() && ident_char(s[p + 1])) {
          ++p;  // digit separator
        } else {
          break;
        }
      }
      std::string text(s.substr(b, p - b));
      std::string clean;
      for (char d : text)
        if (d != '\'') clean += d;
      out.push_back({tok_kind::number, std::move(clean), line});
      continue;
    }
    bool matched = false;
    for (const char* op : punct3) {
      if (s.compare(p, 3, op) == 0) {
        out.push_back({tok_kind::punct, op, line});
        p += 3;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    for (const char* op : punct2) {
      if (s.compare(p, 2, op) == 0) {
        out.push_back({tok_kind::punct, op, line});
        p += 2;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    out.push_back({tok_kind::punct, std::string(1, c), line});
    ++p;
  }
}

// Handles one preprocessor line: pragmas and object-like defines; everything else
// (includes, conditionals, function-like macros) is ignored.
void handle_pp(const pp_line& pl, lexed_source& out) {
  std::vector<token> toks;
  lex_code(pl.text, pl.first_line, toks);
  if (toks.empty()) return;
  if (is_ident(toks[0], "pragma")) {
    if (toks.size() >= 2 && is_ident(toks[1], "unroll")) {
      std::string text = "unroll";
      // "#pragma unroll 4", "#pragma unroll (4)", "#pragma unroll TILE"
      for (size_t i = 2; i < toks.size(); ++i) {
        if (is_punct(toks[i], "(") || is_punct(toks[i], ")")) continue;
        text += " " + toks[i].text;
        break;
      }
      out.tokens.push_back({tok_kind::pragma, text, pl.first_line});
    }
    return;
  }
  if (is_ident(toks[0], "define") && toks.size() >= 2 && toks[1].kind == tok_kind::ident) {
    // Function-like when '(' follows the name with no space: detect from the raw text.
    const std::string& name = toks[1].text;
    size_t at = pl.text.find(name);
    if (at != std::string::npos) {
      size_t after = at + name.size();
      if (after < pl.text.size() && pl.text[after] == '(') return;
    }
    out.defines[name] = std::vector<token>(toks.begin() + 2, toks.end());
  }
}

}  // namespace

lexed_source lex_cuda(std::string_view s) {
  lexed_source out;
  // Split into code and preprocessor lines. A preprocessor line starts with '#' as
  // its first non-blank character, outside comments and strings, and continues over
  // backslash-newlines.
  std::string code;  // code with preprocessor lines blanked (newlines kept)
  code.reserve(s.size());
  size_t p = 0;
  int line = 1;
  bool line_start = true;
  bool in_block_comment = false;
  while (p < s.size()) {
    char c = s[p];
    if (in_block_comment) {
      code += c;
      if (c == '\n') {
        ++line;
      } else if (c == '*' && p + 1 < s.size() && s[p + 1] == '/') {
        code += '/';
        ++p;
        in_block_comment = false;
      }
      ++p;
      continue;
    }
    if (c == '\n') {
      code += c;
      ++line;
      ++p;
      line_start = true;
      continue;
    }
    if (space(c)) {
      code += c;
      ++p;
      continue;
    }
    if (line_start && c == '#') {
      // Collect the directive, joining continuations; comments inside are removed by
      // lex_code when the directive is lexed.
      pp_line pl;
      pl.first_line = line;
      ++p;
      while (p < s.size() && s[p] != '\n') {
        if (s[p] == '\\' && p + 1 < s.size() && (s[p + 1] == '\n' || s[p + 1] == '\r')) {
          size_t q = p + 1;
          if (s[q] == '\r' && q + 1 < s.size() && s[q + 1] == '\n') ++q;
          pl.text += ' ';
          code += '\n';
          ++line;
          p = q + 1;
          continue;
        }
        if (s[p] == '/' && p + 1 < s.size() && s[p + 1] == '*') {
          // A block comment inside a directive may span lines.
          size_t q = p + 2;
          while (q < s.size() && !(s[q] == '*' && q + 1 < s.size() && s[q + 1] == '/')) {
            if (s[q] == '\n') {
              code += '\n';
              ++line;
            }
            ++q;
          }
          p = q + 2 <= s.size() ? q + 2 : s.size();
          pl.text += ' ';
          continue;
        }
        pl.text += s[p++];
      }
      // Emit the code lexed so far, then the pragma at its place.
      lex_code(code, line - static_cast<int>(std::count(code.begin(), code.end(), '\n')), out.tokens);
      code.clear();
      handle_pp(pl, out);
      line_start = false;
      continue;
    }
    line_start = false;
    if (c == '/' && p + 1 < s.size() && s[p + 1] == '/') {
      while (p < s.size() && s[p] != '\n') code += s[p++];
      continue;
    }
    if (c == '/' && p + 1 < s.size() && s[p + 1] == '*') {
      code += "/*";
      p += 2;
      in_block_comment = true;
      continue;
    }
    if (c == '"' || c == '\'') {
      char q = c;
      code += c;
      ++p;
      while (p < s.size() && s[p] != q && s[p] != '\n') {
        if (s[p] == '\\' && p + 1 < s.size()) {
          code += s[p];
          code += s[p + 1];
          if (s[p + 1] == '\n') ++line;
          p += 2;
          continue;
        }
        code += s[p++];
      }
      if (p < s.size() && s[p] == q) code += s[p++];
      continue;
    }
    code += c;
    ++p;
  }
  lex_code(code, line - static_cast<int>(std::count(code.begin(), code.end(), '\n')), out.tokens);
  return out;
}

}  // namespace ks::features
