#include "features/cuda_syntax.hpp"

#include <algorithm>
#include <set>

#include "features/token_brackets.hpp"

namespace ks::features {

namespace {

const std::set<std::string>& type_words() {
  static const std::set<std::string> words = [] {
    std::set<std::string> w = {
        "void",          "bool",        "char",           "short",         "int",          "long",      "float",
        "double",        "signed",      "unsigned",       "half",          "__half",       "half2",     "__half2",
        "__nv_bfloat16", "nv_bfloat16", "__nv_bfloat162", "nv_bfloat162",  "size_t",       "ptrdiff_t", "intptr_t",
        "uintptr_t",     "int8_t",      "int16_t",        "int32_t",       "int64_t",      "uint8_t",   "uint16_t",
        "uint32_t",      "uint64_t",    "dim3",           "__nv_fp8_e4m3", "__nv_fp8_e5m2"};
    for (const char* s : {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong", "ulonglong",
                          "float", "double"})
      for (int n = 1; n <= 4; ++n) w.insert(std::string(s) + std::to_string(n));
    return w;
  }();
  return words;
}

}  // namespace

namespace syntax {

const std::set<std::string>& decl_quals() {
  static const std::set<std::string> q = {
      "const",           "volatile",    "static",     "extern",       "register",     "constexpr",
      "inline",          "__shared__",  "__device__", "__constant__", "__restrict__", "__restrict",
      "__forceinline__", "__managed__", "typename",   "struct",       "mutable",      "thread_local"};
  return q;
}

bool opening(const token& t) { return t.kind == tok_kind::punct && (t.text == "(" || t.text == "[" || t.text == "{"); }
bool closing(const token& t) { return t.kind == tok_kind::punct && (t.text == ")" || t.text == "]" || t.text == "}"); }

// Index of the bracket closing the one at `open`, searching below `e`; e when none.
size_t match_close(const token_list& t, size_t open, size_t e) {
  int depth = 0;
  for (size_t i = open; i < e; ++i) {
    if (opening(t[i])) {
      ++depth;
    } else if (closing(t[i])) {
      --depth;
      if (depth == 0) return i;
      if (depth < 0) return e;
    }
  }
  return e;
}

// Index of the '>' closing a template argument list opened at `open` ('<'); counts
// nested <> and skips bracketed groups. `split` reports that the closing token is a
// '>>' of which only the first character closes. Returns e when there is none.
size_t match_angle(const token_list& t, size_t open, size_t e) {
  int depth = 0;
  for (size_t i = open; i < e; ++i) {
    const token& k = t[i];
    if (k.kind != tok_kind::punct) continue;
    if (k.text == "<") {
      ++depth;
    } else if (k.text == ">") {
      if (--depth == 0) return i;
    } else if (k.text == ">>") {
      depth -= 2;
      if (depth <= 0) return i;
    } else if (k.text == "(" || k.text == "[") {
      i = match_close(t, i, e);
    } else if (k.text == ";" || k.text == "{" || k.text == "}" || k.text == ")" || k.text == "]") {
      return e;
    }
  }
  return e;
}

std::string join_tokens(const token_list& t, size_t b, size_t e) {
  std::string s;
  for (size_t i = b; i < e && i < t.size(); ++i) {
    if (!s.empty()) s += ' ';
    s += t[i].text;
  }
  return s;
}

}  // namespace syntax

using syntax::decl_quals;
using syntax::join_tokens;
using syntax::match_angle;
using syntax::match_close;
using syntax::opening;

namespace {

// ---------------------------------------------------------------------------
// Expression parser (precedence climbing).

struct expr_parser {
  const token_list& t;
  size_t pos;
  size_t end;
  expr_tree& x;
  int depth = 0;

  bool at(std::string_view p) const { return pos < end && is_punct(t[pos], p); }
  bool at_ident(std::string_view w) const { return pos < end && is_ident(t[pos], w); }

  int add(ex_node n) {
    x.nodes.push_back(std::move(n));
    return static_cast<int>(x.nodes.size()) - 1;
  }
  int make(ex_kind k, std::string op, std::vector<int> kids, size_t b) {
    ex_node n;
    n.kind = k;
    n.op = std::move(op);
    n.toks = {b, std::max(b, pos)};
    int d = 0;
    for (int kid : kids) d = std::max(d, x.nodes[static_cast<size_t>(kid)].depth);
    n.depth = d + 1;
    if (n.depth > kMaxExprDepth) {  // too deep to walk safely: an opaque leaf
      n.kind = ex_kind::unknown;
      n.depth = 1;
      kids.clear();
    }
    n.kids = std::move(kids);
    return add(std::move(n));
  }
  int unknown_at(size_t b) {
    if (pos == b && pos < end) ++pos;  // always make progress
    return make(ex_kind::unknown, "", {}, b);
  }

  int parse_comma() {
    size_t b = pos;
    int l = parse_assign();
    while (at(",")) {
      ++pos;
      int r = parse_assign();
      l = make(ex_kind::binary, ",", {l, r}, b);
    }
    return l;
  }

  static bool is_assign_op(const std::string& s) {
    return s == "=" || s == "+=" || s == "-=" || s == "*=" || s == "/=" || s == "%=" || s == "&=" || s == "|=" ||
           s == "^=" || s == "<<=" || s == ">>=";
  }

  int parse_assign() {
    if (++depth > kMaxExprDepth) {
      --depth;
      size_t b = pos;
      pos = end;
      return make(ex_kind::unknown, "", {}, b);
    }
    size_t b = pos;
    int l = parse_ternary();
    if (pos < end && t[pos].kind == tok_kind::punct && is_assign_op(t[pos].text)) {
      std::string op = t[pos].text;
      ++pos;
      int r = parse_assign();
      l = make(ex_kind::binary, op, {l, r}, b);
    }
    --depth;
    return l;
  }

  int parse_ternary() {
    size_t b = pos;
    int c = parse_binary(4);
    if (at("?")) {
      ++pos;
      int a = parse_assign();
      int d;
      if (at(":")) {
        ++pos;
        d = parse_assign();
      } else {
        d = make(ex_kind::unknown, "", {}, pos);
      }
      return make(ex_kind::ternary, "?", {c, a, d}, b);
    }
    return c;
  }

  static int prec_of(const token& k) {
    if (k.kind != tok_kind::punct) return -1;
    const std::string& s = k.text;
    if (s == "||") return 4;
    if (s == "&&") return 5;
    if (s == "|") return 6;
    if (s == "^") return 7;
    if (s == "&") return 8;
    if (s == "==" || s == "!=") return 9;
    if (s == "<" || s == "<=" || s == ">" || s == ">=") return 10;
    if (s == "<<" || s == ">>") return 11;
    if (s == "+" || s == "-") return 12;
    if (s == "*" || s == "/" || s == "%") return 13;
    return -1;
  }

  int parse_binary(int min_prec) {
    size_t b = pos;
    int l = parse_unary();
    while (pos < end) {
      int p = prec_of(t[pos]);
      if (p < 0 || p < min_prec) break;
      std::string op = t[pos].text;
      ++pos;
      int r = parse_binary(p + 1);
      l = make(ex_kind::binary, op, {l, r}, b);
    }
    return l;
  }

  // Is '(' at pos the start of a C-style cast? Its contents must read as a type.
  bool cast_paren(size_t& close) const {
    if (!at("(")) return false;
    size_t c = match_close(t, pos, end);
    if (c >= end || c == pos + 1) return false;
    bool saw_type = false;
    for (size_t i = pos + 1; i < c; ++i) {
      const token& k = t[i];
      if (k.kind == tok_kind::ident) {
        if (is_type_word(k.text)) {
          saw_type = true;
        } else if (decl_quals().count(k.text)) {
          continue;
        } else {
          return false;
        }
      } else if (k.kind == tok_kind::punct && (k.text == "*" || k.text == "&")) {
        continue;
      } else {
        return false;
      }
    }
    if (!saw_type || c + 1 >= end) return false;
    const token& n = t[c + 1];
    bool operand = n.kind == tok_kind::ident || n.kind == tok_kind::number ||
                   (n.kind == tok_kind::punct &&
                    (n.text == "(" || n.text == "*" || n.text == "&" || n.text == "-" || n.text == "!" ||
                     n.text == "~" || n.text == "+" || n.text == "++" || n.text == "--"));
    if (!operand) return false;
    close = c;
    return true;
  }

  int parse_unary() {
    size_t b = pos;
    if (pos >= end) return make(ex_kind::unknown, "", {}, b);
    if (depth > kMaxExprDepth) {  // a pathological prefix chain: skip the rest
      pos = end;
      return make(ex_kind::unknown, "", {}, b);
    }
    struct guard {
      int& d;
      explicit guard(int& x) : d(x) { ++d; }
      ~guard() { --d; }
    } g(depth);
    const token& k = t[pos];
    if (k.kind == tok_kind::punct && (k.text == "-" || k.text == "+" || k.text == "!" || k.text == "~" ||
                                      k.text == "*" || k.text == "&" || k.text == "++" || k.text == "--")) {
      std::string op = k.text;
      ++pos;
      int a = parse_unary();
      return make(ex_kind::unary, op, {a}, b);
    }
    if (is_ident(k, "sizeof") || is_ident(k, "alignof")) {
      ++pos;
      if (at("(")) {
        size_t c = match_close(t, pos, end);
        pos = std::min(end, c + 1);
        return make(ex_kind::unary, "sizeof", {}, b);
      }
      int a = parse_unary();
      return make(ex_kind::unary, "sizeof", {a}, b);
    }
    size_t close = 0;
    if (cast_paren(close)) {
      std::string type = join_tokens(t, pos + 1, close);
      pos = close + 1;
      int a = parse_unary();
      int n = make(ex_kind::cast, "c", {a}, b);
      x.nodes[static_cast<size_t>(n)].type = type;
      return n;
    }
    return parse_postfix();
  }

  int parse_postfix() {
    size_t b = pos;
    int l = parse_primary();
    while (pos < end) {
      if (at("[")) {
        size_t c = match_close(t, pos, end);
        expr_tree sub;
        int idx;
        {
          size_t save_end = end;
          size_t start = pos + 1;
          end = c;
          pos = start;
          idx = start < c ? parse_comma() : make(ex_kind::unknown, "", {}, start);
          end = save_end;
        }
        pos = std::min(end, c + 1);
        l = make(ex_kind::subscript, "[]", {l, idx}, b);
      } else if (at("(")) {
        size_t c = match_close(t, pos, end);
        std::vector<int> kids = {l};
        size_t save_end = end;
        end = c;
        ++pos;
        while (pos < end) {
          size_t before = pos;
          kids.push_back(parse_assign());
          if (at(","))
            ++pos;
          else if (pos == before)
            ++pos;
          else if (pos < end) {  // junk inside the argument list (asm operands, ...)
            pos = end;
          }
        }
        end = save_end;
        pos = std::min(end, c + 1);
        l = make(ex_kind::call, "()", std::move(kids), b);
      } else if ((at(".") || at("->")) && pos + 1 < end && t[pos + 1].kind == tok_kind::ident) {
        bool arrow = at("->");
        std::string name = t[pos + 1].text;
        pos += 2;
        l = make(ex_kind::member, name, {l}, b);
        x.nodes[static_cast<size_t>(l)].arrow = arrow;
      } else if (at("++") || at("--")) {
        std::string op = t[pos].text;
        ++pos;
        l = make(ex_kind::postfix, op, {l}, b);
      } else {
        break;
      }
    }
    return l;
  }

  int parse_primary() {
    size_t b = pos;
    if (pos >= end) return make(ex_kind::unknown, "", {}, b);
    const token& k = t[pos];
    if (k.kind == tok_kind::number) {
      ++pos;
      int n = make(ex_kind::number, k.text, {}, b);
      ex_node& nd = x.nodes[static_cast<size_t>(n)];
      long long iv = 0;
      double dv = 0;
      if (parse_int_literal(k.text, iv)) {
        nd.is_int = true;
        nd.ival = iv;
        nd.num = static_cast<double>(iv);
      } else if (parse_number_literal(k.text, dv)) {
        nd.num = dv;
      }
      return n;
    }
    if (k.kind == tok_kind::string) {
      while (pos < end && t[pos].kind == tok_kind::string) ++pos;
      return make(ex_kind::string, k.text, {}, b);
    }
    if (k.kind == tok_kind::ident) {
      static const std::set<std::string> casts = {"reinterpret_cast", "static_cast", "const_cast", "dynamic_cast"};
      if (casts.count(k.text) && pos + 1 < end && is_punct(t[pos + 1], "<")) {
        size_t close = match_angle(t, pos + 1, end);
        if (close < end && close + 1 < end && is_punct(t[close + 1], "(")) {
          std::string type = join_tokens(t, pos + 2, close);
          size_t pc = match_close(t, close + 1, end);
          size_t save_end = end;
          pos = close + 2;
          end = pc;
          int a = pos < end ? parse_comma() : make(ex_kind::unknown, "", {}, pos);
          end = save_end;
          pos = std::min(end, pc + 1);
          int n = make(ex_kind::cast, k.text, {a}, b);
          x.nodes[static_cast<size_t>(n)].type = type;
          return n;
        }
      }
      // Qualified names: a::b::c, and type-constructor style calls float4(...) fall out
      // as calls of an identifier.
      std::string name = k.text;
      ++pos;
      while (pos + 1 < end && is_punct(t[pos], "::") && t[pos + 1].kind == tok_kind::ident) {
        name += "::" + t[pos + 1].text;
        pos += 2;
      }
      // Template arguments of a function template call: name<...>(...). Only taken
      // when the closing '>' is directly followed by '('.
      if (pos < end && is_punct(t[pos], "<")) {
        size_t close = match_angle(t, pos, end);
        if (close < end && t[close].text == ">" && close + 1 < end && is_punct(t[close + 1], "(")) {
          bool plausible = true;
          for (size_t i = pos + 1; i < close; ++i)
            if (t[i].kind == tok_kind::punct && t[i].text != "," && t[i].text != "::" && t[i].text != "*")
              plausible = false;
          if (plausible) pos = close + 1;
        }
      }
      return make(ex_kind::ident, name, {}, b);
    }
    if (is_punct(k, "::") && pos + 1 < end && t[pos + 1].kind == tok_kind::ident) {
      ++pos;
      return parse_primary();
    }
    if (is_punct(k, "(")) {
      size_t c = match_close(t, pos, end);
      size_t save_end = end;
      ++pos;
      end = c;
      int inner = pos < end ? parse_comma() : make(ex_kind::unknown, "", {}, pos);
      end = save_end;
      pos = std::min(end, c + 1);
      return inner;
    }
    if (is_punct(k, "{")) {
      size_t c = match_close(t, pos, end);
      std::vector<int> kids;
      size_t save_end = end;
      ++pos;
      end = c;
      while (pos < end) {
        size_t before = pos;
        kids.push_back(parse_assign());
        if (at(","))
          ++pos;
        else if (pos == before)
          ++pos;
        else if (pos < end)
          pos = end;
      }
      end = save_end;
      pos = std::min(end, c + 1);
      return make(ex_kind::init_list, "{}", std::move(kids), b);
    }
    if (is_punct(k, "[")) {  // a lambda: skip its capture, parameters and body
      size_t c = match_close(t, pos, end);
      pos = std::min(end, c + 1);
      if (at("(")) pos = std::min(end, match_close(t, pos, end) + 1);
      while (pos < end && !at("{")) ++pos;
      if (at("{")) pos = std::min(end, match_close(t, pos, end) + 1);
      return make(ex_kind::unknown, "lambda", {}, b);
    }
    return unknown_at(b);
  }
};

}  // namespace

bool is_type_word(const std::string& w) { return type_words().count(w) > 0; }

bool is_vector_type(const std::string& base) {
  type_shape s = shape_of_type(base);
  return s.lanes > 1;
}

type_shape shape_of_type(const std::string& base) {
  static const std::map<std::string, std::pair<int, std::string>> scalars = {{"float", {4, "float"}},
                                                                             {"double", {8, "double"}},
                                                                             {"half", {2, "half"}},
                                                                             {"__half", {2, "half"}},
                                                                             {"__nv_bfloat16", {2, "bfloat16"}},
                                                                             {"nv_bfloat16", {2, "bfloat16"}},
                                                                             {"int", {4, "int"}},
                                                                             {"unsigned", {4, "int"}},
                                                                             {"signed", {4, "int"}},
                                                                             {"char", {1, "char"}},
                                                                             {"short", {2, "short"}},
                                                                             {"long", {8, "long"}},
                                                                             {"long long", {8, "long"}},
                                                                             {"size_t", {8, "long"}},
                                                                             {"ptrdiff_t", {8, "long"}},
                                                                             {"intptr_t", {8, "long"}},
                                                                             {"uintptr_t", {8, "long"}},
                                                                             {"int8_t", {1, "char"}},
                                                                             {"uint8_t", {1, "char"}},
                                                                             {"int16_t", {2, "short"}},
                                                                             {"uint16_t", {2, "short"}},
                                                                             {"int32_t", {4, "int"}},
                                                                             {"uint32_t", {4, "int"}},
                                                                             {"int64_t", {8, "long"}},
                                                                             {"uint64_t", {8, "long"}},
                                                                             {"bool", {1, "bool"}},
                                                                             {"__nv_fp8_e4m3", {1, "fp8"}},
                                                                             {"__nv_fp8_e5m2", {1, "fp8"}}};
  type_shape out;
  auto it = scalars.find(base);
  if (it != scalars.end()) {
    out.bytes = it->second.first;
    out.scalar = it->second.second;
    return out;
  }
  if (base == "half2" || base == "__half2") return {4, 2, "half"};
  if (base == "__nv_bfloat162" || base == "nv_bfloat162") return {4, 2, "bfloat16"};
  // charN, ucharN, shortN, intN, uintN, longN, longlongN, floatN, doubleN
  if (!base.empty() && base.back() >= '1' && base.back() <= '4') {
    std::string stem = base.substr(0, base.size() - 1);
    int lanes = base.back() - '0';
    static const std::map<std::string, std::pair<int, std::string>> stems = {
        {"char", {1, "char"}},     {"uchar", {1, "char"}},     {"short", {2, "short"}}, {"ushort", {2, "short"}},
        {"int", {4, "int"}},       {"uint", {4, "int"}},       {"long", {8, "long"}},   {"ulong", {8, "long"}},
        {"longlong", {8, "long"}}, {"ulonglong", {8, "long"}}, {"float", {4, "float"}}, {"double", {8, "double"}}};
    auto s = stems.find(stem);
    if (s != stems.end()) return {s->second.first * lanes, lanes, s->second.second};
  }
  return out;
}

std::string base_type_of(const std::string& type_text) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : type_text + " ") {
    if (c == ' ' || c == '*' || c == '&') {
      if (!cur.empty()) words.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  int longs = 0;
  bool is_short = false, is_char = false, is_unsigned = false, is_int = false;
  std::string other;
  for (auto& w : words) {
    if (w == "const" || w == "volatile" || w == "__restrict__" || w == "__restrict" || w == "static" || w == "extern" ||
        w == "__shared__" || w == "constexpr" || w == "__constant__" || w == "register" || w == "struct" ||
        w == "typename" || w == "__device__" || w == "__forceinline__" || w == "inline")
      continue;
    if (w == "long")
      ++longs;
    else if (w == "short")
      is_short = true;
    else if (w == "char")
      is_char = true;
    else if (w == "unsigned" || w == "signed")
      is_unsigned = true;
    else if (w == "int")
      is_int = true;
    else if (other.empty())
      other = w;
  }
  if (!other.empty()) return other;
  if (is_char) return "char";
  if (is_short) return "short";
  if (longs >= 2) return "long long";
  if (longs == 1) return "long";
  if (is_int || is_unsigned) return is_int && !is_unsigned ? "int" : "unsigned";
  return "";
}

int pointer_depth_of(const std::string& type_text) {
  return static_cast<int>(std::count(type_text.begin(), type_text.end(), '*'));
}

expr_tree parse_expression(const token_list& t, size_t b, size_t e) {
  expr_tree x;
  e = std::min(e, t.size());
  if (b >= e) {
    ex_node n;
    n.kind = ex_kind::unknown;
    n.toks = {b, b};
    x.nodes.push_back(n);
    x.root = 0;
    return x;
  }
  expr_parser p{t, b, e, x};
  x.root = p.parse_comma();
  // Anything left over (a syntax the parser does not know) is ignored; the analysis
  // sees what was parsed.
  return x;
}

std::string node_text(const token_list& t, const expr_tree& x, int node) {
  if (node < 0 || static_cast<size_t>(node) >= x.nodes.size()) return "";
  const ex_node& n = x.at(node);
  return join_tokens(t, n.toks.b, n.toks.e);
}

bool declaration::has_qual(const std::string& q) const {
  return std::find(quals.begin(), quals.end(), q) != quals.end();
}

bool parse_declaration(const token_list& t, size_t b, size_t e, declaration& out) {
  out = declaration{};
  e = std::min(e, t.size());
  size_t i = b;
  if (i >= e || t[i].kind != tok_kind::ident) return false;
  static const std::set<std::string> not_decl = {"return", "using", "typedef", "namespace", "template",
                                                 "goto",   "case",  "default", "delete",    "new",
                                                 "throw",  "asm",   "__asm__"};
  if (not_decl.count(t[i].text)) return false;
  std::vector<std::string> type_parts;
  // Qualifiers and alignment specifiers.
  while (i < e && t[i].kind == tok_kind::ident) {
    const std::string& w = t[i].text;
    if (w == "__align__" || w == "alignas" || w == "__launch_bounds__") {
      out.quals.push_back(w);
      ++i;
      if (i < e && is_punct(t[i], "(")) i = match_close(t, i, e) + 1;
      continue;
    }
    if (decl_quals().count(w)) {
      out.quals.push_back(w);
      ++i;
      continue;
    }
    break;
  }
  if (i >= e || t[i].kind != tok_kind::ident) return false;
  bool builtin = false;
  if (is_type_word(t[i].text)) {
    builtin = true;
    while (i < e && t[i].kind == tok_kind::ident &&
           (is_type_word(t[i].text) || t[i].text == "const" || t[i].text == "volatile")) {
      if (t[i].text == "const" || t[i].text == "volatile")
        out.quals.push_back(t[i].text);
      else
        type_parts.push_back(t[i].text);
      ++i;
    }
  } else if (t[i].text == "auto") {
    type_parts.push_back("auto");
    ++i;
    builtin = true;
  } else {
    std::string name = t[i].text;
    ++i;
    while (i + 1 < e && is_punct(t[i], "::") && t[i + 1].kind == tok_kind::ident) {
      name += "::" + t[i + 1].text;
      i += 2;
    }
    if (i < e && is_punct(t[i], "<")) {
      size_t c = match_angle(t, i, e);
      if (c >= e) return false;
      name += " " + join_tokens(t, i, c + 1);
      i = c + 1;
    }
    type_parts.push_back(name);
  }
  // Qualifiers after the type ("float const").
  while (i < e && t[i].kind == tok_kind::ident && (t[i].text == "const" || t[i].text == "volatile")) {
    out.quals.push_back(t[i].text);
    ++i;
  }
  for (auto& p : type_parts) {
    if (!out.type.empty()) out.type += ' ';
    out.type += p;
  }
  // Declarators.
  while (i < e) {
    declarator d;
    while (i < e && ((t[i].kind == tok_kind::punct && (t[i].text == "*" || t[i].text == "&" || t[i].text == "&&")) ||
                     (t[i].kind == tok_kind::ident && (t[i].text == "const" || t[i].text == "volatile" ||
                                                       t[i].text == "__restrict__" || t[i].text == "__restrict")))) {
      if (t[i].text == "*") ++d.pointer_depth;
      ++i;
    }
    if (i >= e || t[i].kind != tok_kind::ident || is_type_word(t[i].text)) return false;
    if (!builtin && out.items.empty() && d.pointer_depth == 0) {
      // "Name name": a user type followed directly by the declared name.
    }
    d.name = t[i].text;
    d.name_tok = i;
    ++i;
    while (i < e && is_punct(t[i], "[")) {
      size_t c = match_close(t, i, e);
      if (c >= e) return false;
      d.dims.push_back({i + 1, c});
      i = c + 1;
    }
    if (i < e && is_punct(t[i], "=")) {
      ++i;
      size_t s = i;
      // The initializer runs to the next top-level ','.
      while (i < e && !is_punct(t[i], ",")) {
        if (opening(t[i])) i = match_close(t, i, e);
        ++i;
      }
      d.has_init = true;
      if (s < e && is_punct(t[s], "{")) {
        d.brace_init = true;
        size_t c = match_close(t, s, e);
        d.init = {s + 1, std::min(c, e)};
      } else {
        d.init = {s, std::min(i, e)};
      }
    } else if (i < e && (is_punct(t[i], "{") || is_punct(t[i], "("))) {
      size_t c = match_close(t, i, e);
      d.has_init = true;
      d.brace_init = is_punct(t[i], "{");
      d.init = {i + 1, std::min(c, e)};
      i = c + 1;
    }
    out.items.push_back(std::move(d));
    if (i < e && is_punct(t[i], ",")) {
      ++i;
      continue;
    }
    if (i >= e) break;
    return false;
  }
  return !out.items.empty();
}

}  // namespace ks::features
