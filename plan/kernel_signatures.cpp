#include "plan/kernel_signatures.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

namespace ks {

const char* to_string(scalar_kind k) {
  switch (k) {
    case scalar_kind::int32:
      return "int32";
    case scalar_kind::int64:
      return "int64";
    case scalar_kind::float32:
      return "float32";
    case scalar_kind::float64:
      return "float64";
    case scalar_kind::float16:
      return "float16";
    case scalar_kind::bfloat16:
      return "bfloat16";
    case scalar_kind::boolean:
      return "bool";
    case scalar_kind::other:
      return "other";
  }
  return "other";
}

std::string kernel_signature::params_text() const {
  std::string s;
  for (auto& p : params) {
    if (!s.empty()) s += ", ";
    s += p.type;
    if (!p.name.empty()) s += " " + p.name;
  }
  return s;
}

const kernel_signature* find_kernel(const std::vector<kernel_signature>& kernels, std::string_view name) {
  for (auto& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

namespace {

enum class tok { ident, number, string, punct };

struct token {
  tok type;
  std::string text;
  int line;
};

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

// Splits CUDA source into tokens, dropping comments and preprocessor lines. String
// literals are kept as single tokens (their text without quotes) so that `extern "C"`
// can be recognised; their contents are never scanned for keywords.
std::vector<token> tokenize(std::string_view s) {
  std::vector<token> out;
  size_t p = 0;
  int line = 1;
  bool line_start = true;  // only whitespace so far on this line
  auto skip_block_comment = [&] {
    p += 2;
    while (p < s.size() && !(s[p] == '*' && p + 1 < s.size() && s[p + 1] == '/')) {
      if (s[p] == '\n') ++line;
      ++p;
    }
    p = std::min(s.size(), p + 2);
  };
  while (p < s.size()) {
    char c = s[p];
    if (c == '\n') {
      ++line;
      ++p;
      line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++p;
      continue;
    }
    if (c == '/' && p + 1 < s.size() && s[p + 1] == '/') {
      while (p < s.size() && s[p] != '\n') ++p;
      continue;
    }
    if (c == '/' && p + 1 < s.size() && s[p + 1] == '*') {
      skip_block_comment();
      continue;
    }
    if (c == '\\' && p + 1 < s.size() && s[p + 1] == '\n') {
      p += 2;
      ++line;
      continue;
    }
    if (c == '#' && line_start) {
      // A directive runs to the end of the line, continued by backslash-newline.
      while (p < s.size() && s[p] != '\n') {
        if (s[p] == '\\' && p + 1 < s.size() && s[p + 1] == '\n') {
          p += 2;
          ++line;
          continue;
        }
        if (s[p] == '\\' && p + 2 < s.size() && s[p + 1] == '\r' && s[p + 2] == '\n') {
          p += 3;
          ++line;
          continue;
        }
        if (s[p] == '/' && p + 1 < s.size() && s[p + 1] == '*') {
          skip_block_comment();
          continue;
        }
        if (s[p] == '/' && p + 1 < s.size() && s[p + 1] == '/') {
          while (p < s.size() && s[p] != '\n') ++p;
          break;
        }
        ++p;
      }
      continue;
    }
    line_start = false;
    size_t start = p;
    if (ident_start(c)) {
      while (p < s.size() && ident_char(s[p])) ++p;
      std::string_view word = s.substr(start, p - start);
      // Raw string literal: R"delim( ... )delim", with optional u8/u/U/L prefix.
      if (p < s.size() && s[p] == '"' && !word.empty() && word.back() == 'R' &&
          (word == "R" || word == "u8R" || word == "uR" || word == "UR" || word == "LR")) {
        size_t open = s.find('(', p);
        if (open == std::string_view::npos) break;
        std::string close = ")" + std::string(s.substr(p + 1, open - p - 1)) + "\"";
        size_t end = s.find(close, open);
        size_t stop = end == std::string_view::npos ? s.size() : end + close.size();
        std::string body(s.substr(open + 1, (end == std::string_view::npos ? s.size() : end) - open - 1));
        line += static_cast<int>(std::count(s.begin() + p, s.begin() + stop, '\n'));
        out.push_back({tok::string, body, line});
        p = stop;
        continue;
      }
      // Encoding prefix of an ordinary string or character literal.
      if (p < s.size() && (s[p] == '"' || s[p] == '\'') && (word == "u8" || word == "u" || word == "U" || word == "L"))
        continue;  // the literal is lexed next round
      out.push_back({tok::ident, std::string(word), line});
      continue;
    }
    if (digit(c) || (c == '.' && p + 1 < s.size() && digit(s[p + 1]))) {
      // pp-number: digits, letters, dots, digit separators and exponent signs.
      while (p < s.size()) {
        char d = s[p];
        if (ident_char(d) || d == '.') {
          ++p;
          continue;
        }
        if (d == '\'' && p + 1 < s.size() && ident_char(s[p + 1])) {
          ++p;
          continue;
        }
        if ((d == '+' || d == '-') && (s[p - 1] == 'e' || s[p - 1] == 'E' || s[p - 1] == 'p' || s[p - 1] == 'P')) {
          ++p;
          continue;
        }
        break;
      }
      out.push_back({tok::number, std::string(s.substr(start, p - start)), line});
      continue;
    }
    if (c == '"' || c == '\'') {
      ++p;
      std::string body;
      while (p < s.size() && s[p] != c && s[p] != '\n') {
        if (s[p] == '\\' && p + 1 < s.size()) {
          if (s[p + 1] == '\n') ++line;
          body += s[p];
          body += s[p + 1];
          p += 2;
          continue;
        }
        body += s[p++];
      }
      if (p < s.size() && s[p] == c) ++p;
      out.push_back({c == '"' ? tok::string : tok::number, body, line});
      continue;
    }
    if (c == ':' && p + 1 < s.size() && s[p + 1] == ':') {
      out.push_back({tok::punct, "::", line});
      p += 2;
      continue;
    }
    out.push_back({tok::punct, std::string(1, c), line});
    ++p;
  }
  return out;
}

bool is_punct(const token& t, std::string_view p) { return t.type == tok::punct && t.text == p; }
bool is_ident(const token& t, std::string_view w) { return t.type == tok::ident && t.text == w; }

// Index of the token closing the bracket opened at `open`, or toks.size().
size_t matching(const std::vector<token>& toks, size_t open) {
  const std::string& o = toks[open].text;
  std::string c = o == "(" ? ")" : o == "[" ? "]" : o == "{" ? "}" : ">";
  int depth = 0;
  for (size_t i = open; i < toks.size(); ++i) {
    if (toks[i].type != tok::punct) continue;
    if (toks[i].text == o)
      ++depth;
    else if (toks[i].text == c && --depth == 0)
      return i;
    else if (o == "<" && (toks[i].text == ";" || toks[i].text == "{"))
      return toks.size();
  }
  return toks.size();
}

const std::set<std::string> qualifiers = {"const",    "volatile", "__restrict__", "__restrict", "restrict",
                                          "struct",   "class",    "enum",         "typename",   "__grid_constant__",
                                          "register", "std"};

const std::set<std::string> type_words = {"void", "bool",  "char",   "short",  "int",
                                          "long", "float", "double", "signed", "unsigned"};

struct kind_info {
  scalar_kind kind;
  bool is_unsigned;
  int width;
};

const std::map<std::string, kind_info>& named_types() {
  static const std::map<std::string, kind_info> m = [] {
    std::map<std::string, kind_info> t = {
        {"int32_t", {scalar_kind::int32, false, 1}},         {"uint32_t", {scalar_kind::int32, true, 1}},
        {"int64_t", {scalar_kind::int64, false, 1}},         {"uint64_t", {scalar_kind::int64, true, 1}},
        {"size_t", {scalar_kind::int64, true, 1}},           {"ptrdiff_t", {scalar_kind::int64, false, 1}},
        {"ssize_t", {scalar_kind::int64, false, 1}},         {"intptr_t", {scalar_kind::int64, false, 1}},
        {"uintptr_t", {scalar_kind::int64, true, 1}},        {"half", {scalar_kind::float16, false, 1}},
        {"__half", {scalar_kind::float16, false, 1}},        {"half2", {scalar_kind::float16, false, 2}},
        {"__half2", {scalar_kind::float16, false, 2}},       {"__nv_bfloat16", {scalar_kind::bfloat16, false, 1}},
        {"nv_bfloat16", {scalar_kind::bfloat16, false, 1}},  {"__nv_bfloat162", {scalar_kind::bfloat16, false, 2}},
        {"nv_bfloat162", {scalar_kind::bfloat16, false, 2}},
    };
    for (int w = 1; w <= 4; ++w) {
      std::string n = std::to_string(w);
      t["float" + n] = {scalar_kind::float32, false, w};
      t["double" + n] = {scalar_kind::float64, false, w};
      t["int" + n] = {scalar_kind::int32, false, w};
      t["uint" + n] = {scalar_kind::int32, true, w};
      t["longlong" + n] = {scalar_kind::int64, false, w};
      t["ulonglong" + n] = {scalar_kind::int64, true, w};
      t["long" + n] = {scalar_kind::int64, false, w};
      t["ulong" + n] = {scalar_kind::int64, true, w};
    }
    return t;
  }();
  return m;
}

// The kind of a type given by its base words (qualifiers and the name removed).
kind_info classify(const std::vector<std::string>& words) {
  if (words.size() == 1) {
    auto it = named_types().find(words[0]);
    if (it != named_types().end()) return it->second;
  }
  int longs = 0;
  bool is_unsigned = false, has_int = false, has_short = false, has_char = false, other = false;
  bool has_float = false, has_double = false, has_bool = false, has_void = false;
  for (auto& w : words) {
    if (w == "long")
      ++longs;
    else if (w == "unsigned")
      is_unsigned = true;
    else if (w == "signed") {
    } else if (w == "int")
      has_int = true;
    else if (w == "short")
      has_short = true;
    else if (w == "char")
      has_char = true;
    else if (w == "float")
      has_float = true;
    else if (w == "double")
      has_double = true;
    else if (w == "bool")
      has_bool = true;
    else if (w == "void")
      has_void = true;
    else
      other = true;
  }
  if (other || has_void || words.empty()) return {scalar_kind::other, false, 1};
  if (has_float) return {scalar_kind::float32, false, 1};
  if (has_double) return {longs ? scalar_kind::other : scalar_kind::float64, false, 1};
  if (has_bool) return {scalar_kind::boolean, false, 1};
  if (has_char || has_short) return {scalar_kind::other, is_unsigned, 1};
  (void)has_int;
  // int, unsigned, long, long long (LP64: long is 64 bits).
  return {longs ? scalar_kind::int64 : scalar_kind::int32, is_unsigned, 1};
}

std::string join_type(const std::vector<const token*>& toks) {
  std::string s;
  const token* prev = nullptr;
  for (const token* t : toks) {
    bool no_space = !prev || t->text == "::" || prev->text == "::" || t->text == "*" || t->text == "&" ||
                    t->text == "," || t->text == ">" || t->text == "[" || t->text == "]" || prev->text == "<" ||
                    prev->text == "[" || t->text == "<" || t->text == "(" || t->text == ")" || prev->text == "(";
    if (!no_space) s += ' ';
    s += t->text;
    prev = t;
  }
  return s;
}

kernel_param read_param(const std::vector<token>& toks, size_t b, size_t e) {
  kernel_param p;
  // A default argument is not part of the type.
  size_t end = b;
  int depth = 0;
  for (; end < e; ++end) {
    const token& t = toks[end];
    if (t.type == tok::punct && (t.text == "(" || t.text == "[" || t.text == "<")) ++depth;
    if (t.type == tok::punct && (t.text == ")" || t.text == "]" || t.text == ">")) --depth;
    if (depth == 0 && is_punct(t, "=")) break;
  }
  // Array suffix: float x[] or float x[4] is a pointer.
  size_t core_end = end;
  for (size_t i = b; i < end; ++i)
    if (is_punct(toks[i], "[")) {
      core_end = i;
      p.is_pointer = true;
      break;
    }
  bool has_ref = false;
  bool seen_star = false;
  bool const_before_star = false;
  for (size_t i = b; i < core_end; ++i) {
    if (is_punct(toks[i], "*")) {
      if (!seen_star) p.pointee_const = const_before_star;
      seen_star = true;
      p.is_pointer = true;
    }
    if (is_punct(toks[i], "&")) has_ref = true;
    if (is_ident(toks[i], "const") && !seen_star) const_before_star = true;
  }
  if (p.is_pointer && !seen_star) p.pointee_const = const_before_star;
  // The name: a trailing identifier that follows a type.
  size_t name_at = core_end;
  if (core_end > b) {
    const token& last = toks[core_end - 1];
    if (last.type == tok::ident && !qualifiers.count(last.text) && !type_words.count(last.text)) {
      bool type_before = false;
      for (size_t i = b; i + 1 < core_end; ++i) {
        const token& t = toks[i];
        if ((t.type == tok::ident && !qualifiers.count(t.text)) || is_punct(t, "*") || is_punct(t, "&"))
          type_before = true;
      }
      if (type_before && !(core_end - 1 > b && is_punct(toks[core_end - 2], "::"))) {
        name_at = core_end - 1;
        p.name = last.text;
      }
    }
  }
  std::vector<const token*> type_toks;
  std::vector<std::string> base;
  int angle = 0;
  for (size_t i = b; i < end; ++i) {
    if (i == name_at) continue;
    const token& t = toks[i];
    type_toks.push_back(&t);
    if (is_punct(t, "<")) ++angle;
    if (is_punct(t, ">")) --angle;
    if (i >= core_end || angle > 0) continue;
    if (t.type == tok::ident && !qualifiers.count(t.text)) base.push_back(t.text);
    if (t.type == tok::punct && t.text != "*" && t.text != "&" && t.text != "::" && t.text != ">")
      base.push_back(t.text);  // makes the type "other"
  }
  p.type = join_type(type_toks);
  kind_info k = classify(base);
  p.kind = has_ref ? scalar_kind::other : k.kind;
  p.is_unsigned = k.is_unsigned;
  p.vector_width = k.width;
  return p;
}

const std::set<std::string> attribute_calls = {"__launch_bounds__", "__maxnreg__", "__cluster_dims__",
                                               "__attribute__",     "__declspec",  "alignas"};

}  // namespace

std::vector<kernel_signature> extract_kernel_signatures(std::string_view source) {
  std::vector<token> toks = tokenize(source);
  std::vector<kernel_signature> out;
  std::map<std::string, size_t> seen;  // name → index in out
  std::vector<bool> braces;            // per open '{': an extern "C" { block?
  bool next_brace_extern_c = false;

  for (size_t i = 0; i < toks.size(); ++i) {
    const token& t = toks[i];
    if (is_ident(t, "extern") && i + 2 < toks.size() && toks[i + 1].type == tok::string && is_punct(toks[i + 2], "{")) {
      next_brace_extern_c = toks[i + 1].text == "C";
      continue;
    }
    if (is_punct(t, "{")) {
      braces.push_back(next_brace_extern_c);
      next_brace_extern_c = false;
      continue;
    }
    if (is_punct(t, "}")) {
      if (!braces.empty()) braces.pop_back();
      continue;
    }
    if (!is_ident(t, "__global__")) continue;

    kernel_signature sig;
    // Look back to the start of the declaration for extern "C" and template<...>.
    bool extern_c = std::find(braces.begin(), braces.end(), true) != braces.end();
    bool is_template = false;
    for (size_t j = i; j-- > 0;) {
      const token& u = toks[j];
      if (is_punct(u, ";") || is_punct(u, "{") || is_punct(u, "}")) break;
      if (is_ident(u, "template")) is_template = true;
      if (is_ident(u, "extern") && j + 1 < toks.size() && toks[j + 1].type == tok::string)
        extern_c = toks[j + 1].text == "C";
    }
    // Forward to the parameter list; the name is the identifier just before it.
    size_t k = i + 1;
    size_t name_at = toks.size();
    size_t open = toks.size();
    for (; k < toks.size(); ++k) {
      const token& u = toks[k];
      if (is_punct(u, ";") || is_punct(u, "{") || is_punct(u, "}")) break;
      if (u.type == tok::ident && attribute_calls.count(u.text) && k + 1 < toks.size() && is_punct(toks[k + 1], "(")) {
        size_t close = matching(toks, k + 1);
        if (u.text == "__launch_bounds__" && k + 3 < toks.size() && toks[k + 2].type == tok::number &&
            (is_punct(toks[k + 3], ")") || is_punct(toks[k + 3], ","))) {
          const std::string& n = toks[k + 2].text;
          int64_t v = 0;
          auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
          if (ec == std::errc()) sig.launch_bounds = v;
          (void)ptr;
        }
        k = close;
        continue;
      }
      if (is_punct(u, "[") && k + 1 < toks.size() && is_punct(toks[k + 1], "[")) {
        while (k + 1 < toks.size() && !(is_punct(toks[k], "]") && is_punct(toks[k + 1], "]"))) ++k;
        ++k;
        continue;
      }
      if (is_punct(u, "<") && name_at < toks.size()) {  // explicit specialisation k<float>
        is_template = true;
        k = matching(toks, k);
        continue;
      }
      if (u.type == tok::ident) name_at = k;
      if (is_punct(u, "(")) {
        open = k;
        break;
      }
    }
    if (open >= toks.size() || name_at >= toks.size()) continue;
    size_t close = matching(toks, open);
    if (close >= toks.size()) continue;

    sig.name = toks[name_at].text;
    sig.line = toks[name_at].line;
    // Split the parameter list at top-level commas.
    std::vector<std::pair<size_t, size_t>> ranges;
    size_t start = open + 1;
    int depth = 0;
    for (size_t m = open + 1; m < close; ++m) {
      const token& u = toks[m];
      if (u.type == tok::punct && (u.text == "(" || u.text == "[" || u.text == "{" || u.text == "<"))
        ++depth;
      else if (u.type == tok::punct && (u.text == ")" || u.text == "]" || u.text == "}" || u.text == ">"))
        --depth;
      else if (depth == 0 && is_punct(u, ",")) {
        ranges.push_back({start, m});
        start = m + 1;
      }
    }
    if (close > start) ranges.push_back({start, close});
    bool only_void =
        ranges.size() == 1 && ranges[0].second - ranges[0].first == 1 && is_ident(toks[ranges[0].first], "void");
    if (!only_void)
      for (auto [b, e] : ranges) sig.params.push_back(read_param(toks, b, e));

    if (is_template) {
      sig.not_launchable_reason =
          "it is a template: its instances have mangled names; launch an extern \"C\" "
          "kernel that calls it with fixed template arguments";
    } else if (!extern_c) {
      sig.not_launchable_reason =
          "it is not declared extern \"C\", so its name is mangled; declare it "
          "extern \"C\" __global__";
    }
    sig.launchable = sig.not_launchable_reason.empty();

    bool has_body = close + 1 < toks.size() && is_punct(toks[close + 1], "{");
    auto it = seen.find(sig.name);
    if (it == seen.end()) {
      seen[sig.name] = out.size();
      out.push_back(std::move(sig));
    } else if (has_body) {
      // A definition after a declaration: its parameter names are the ones to report.
      kernel_signature& prev = out[it->second];
      prev.params = sig.params;
      if (sig.launch_bounds) prev.launch_bounds = sig.launch_bounds;
    }
    i = close;
  }
  return out;
}

}  // namespace ks
