// The statement and file-scope parsers of features/cuda_syntax.hpp: statements (blocks,
// loops with their header parts and #pragma unroll, ifs, switches, declarations,
// expression statements), function parameters, and parse_source, which finds the
// functions, template parameters, enums and file-scope declarations of a source.
// Expressions and declarations are parsed in cuda_syntax.cpp.
#include "features/cuda_syntax.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "features/token_brackets.hpp"

namespace ks::features {

using syntax::decl_quals;
using syntax::join_tokens;
using syntax::match_angle;
using syntax::match_close;
using syntax::opening;

namespace {

// ---------------------------------------------------------------------------
// Statements.

struct stmt_parser {
  const token_list& t;
  int depth = 0;

  statement parse_block(size_t b, size_t e) {
    statement s;
    s.kind = st_kind::block;
    s.r = {b, e};
    size_t i = b;
    while (i < e) {
      size_t before = i;
      statement k = parse_stmt(i, e);
      if (k.kind != st_kind::empty) s.kids.push_back(std::move(k));
      if (i <= before) i = before + 1;
    }
    return s;
  }

  // The end (exclusive) of a simple statement starting at i: the top-level ';' or a
  // '}' that closes an enclosing block.
  size_t simple_end(size_t i, size_t e) {
    while (i < e) {
      if (is_punct(t[i], ";")) return i;
      if (is_punct(t[i], "}")) return i;
      if (opening(t[i])) {
        size_t c = match_close(t, i, e);
        if (c >= e) return e;
        i = c + 1;
        continue;
      }
      ++i;
    }
    return e;
  }

  statement parse_stmt(size_t& i, size_t e) {
    statement s;
    if (i >= e) return s;
    if (depth >= kMaxStmtDepth) {  // nested too deep: skip to the end of this range
      i = e;
      return s;
    }
    struct guard {
      int& d;
      explicit guard(int& x) : d(x) { ++d; }
      ~guard() { --d; }
    } g(depth);
    const token& k = t[i];
    if (k.kind == tok_kind::pragma) {
      std::string pragma = k.text;
      ++i;
      statement n = parse_stmt(i, e);
      if (n.kind == st_kind::for_loop || n.kind == st_kind::while_loop || n.kind == st_kind::do_loop) n.pragma = pragma;
      return n;
    }
    if (is_punct(k, ";")) {
      ++i;
      return s;
    }
    if (is_punct(k, "{")) {
      size_t c = match_close(t, i, e);
      s = parse_block(i + 1, c);
      s.r = {i, std::min(c + 1, e)};
      i = std::min(c + 1, e);
      return s;
    }
    if (is_punct(k, "}")) {  // stray closer
      ++i;
      return s;
    }
    if (k.kind == tok_kind::ident && parse_keyword_stmt(i, e, s)) return s;
    size_t b = i;
    size_t end = simple_end(i, e);
    declaration d;
    s.kind = parse_declaration(t, b, end, d) ? st_kind::decl : st_kind::expr;
    s.r = {b, end};
    i = end < e && is_punct(t[end], ";") ? end + 1 : end;
    if (i == b) ++i;
    return s;
  }

  // A statement that starts with a keyword (for, while, do, if, switch, a case or
  // default label, a dangling else, return/break/continue/goto): parsed into s, true.
  // False for anything else (i then past an `if` without its condition).
  bool parse_keyword_stmt(size_t& i, size_t e, statement& s) {
    const std::string& w = t[i].text;
    if (w == "for" && i + 1 < e && is_punct(t[i + 1], "(")) {
      size_t b = i;
      size_t c = match_close(t, i + 1, e);
      // Split the header at top-level ';'.
      std::vector<size_t> semis;
      for (size_t j = i + 2; j < c; ++j) {
        if (opening(t[j])) {
          j = match_close(t, j, c);
          continue;
        }
        if (is_punct(t[j], ";")) semis.push_back(j);
      }
      s.kind = st_kind::for_loop;
      if (semis.size() >= 2) {
        s.init = {i + 2, semis[0]};
        s.cond = {semis[0] + 1, semis[1]};
        s.step = {semis[1] + 1, c};
      } else {
        s.init = {i + 2, c};  // range-for or garbage
      }
      i = std::min(c + 1, e);
      s.kids.push_back(parse_stmt(i, e));
      s.r = {b, i};
      return true;
    }
    if (w == "while" && i + 1 < e && is_punct(t[i + 1], "(")) {
      size_t b = i;
      size_t c = match_close(t, i + 1, e);
      s.kind = st_kind::while_loop;
      s.cond = {i + 2, c};
      i = std::min(c + 1, e);
      s.kids.push_back(parse_stmt(i, e));
      s.r = {b, i};
      return true;
    }
    if (w == "do") {
      size_t b = i;
      ++i;
      s.kind = st_kind::do_loop;
      s.kids.push_back(parse_stmt(i, e));
      if (i < e && is_ident(t[i], "while") && i + 1 < e && is_punct(t[i + 1], "(")) {
        size_t c = match_close(t, i + 1, e);
        s.cond = {i + 2, c};
        i = std::min(c + 1, e);
        if (i < e && is_punct(t[i], ";")) ++i;
      }
      s.r = {b, i};
      return true;
    }
    if (w == "if") {
      size_t b = i;
      ++i;
      if (i < e && is_ident(t[i], "constexpr")) ++i;
      if (i < e && is_punct(t[i], "(")) {
        size_t c = match_close(t, i, e);
        s.kind = st_kind::if_stmt;
        s.cond = {i + 1, c};
        i = std::min(c + 1, e);
        s.kids.push_back(parse_stmt(i, e));
        if (i < e && is_ident(t[i], "else")) {
          ++i;
          s.kids.push_back(parse_stmt(i, e));
        }
        s.r = {b, i};
        return true;
      }
    }
    if (w == "switch" && i + 1 < e && is_punct(t[i + 1], "(")) {
      size_t b = i;
      size_t c = match_close(t, i + 1, e);
      s.kind = st_kind::switch_stmt;
      s.cond = {i + 2, c};
      i = std::min(c + 1, e);
      s.kids.push_back(parse_stmt(i, e));
      s.r = {b, i};
      return true;
    }
    if (w == "case" || w == "default") {
      // Skip the label up to its ':' (not '::').
      while (i < e && !is_punct(t[i], ":")) ++i;
      if (i < e) ++i;
      return true;
    }
    if (w == "else") {  // dangling else: skip the keyword
      ++i;
      return true;
    }
    if (w == "return" || w == "break" || w == "continue" || w == "goto") {
      size_t b = i;
      size_t end = simple_end(i, e);
      s.kind = st_kind::jump;
      s.r = {b, end};
      i = end < e && is_punct(t[end], ";") ? end + 1 : end;
      return true;
    }
    return false;
  }
};

param_decl read_param(const token_list& t, size_t b, size_t e) {
  param_decl p;
  // Drop a default argument.
  for (size_t i = b; i < e; ++i) {
    if (opening(t[i])) {
      i = match_close(t, i, e);
      continue;
    }
    if (is_punct(t[i], "=")) {
      e = i;
      break;
    }
  }
  size_t name_at = e;
  for (size_t i = e; i > b; --i) {
    const token& k = t[i - 1];
    if (k.kind == tok_kind::ident && !is_type_word(k.text) && !decl_quals().count(k.text)) {
      name_at = i - 1;
      break;
    }
    if (is_punct(k, "]")) {  // an array parameter: float x[]
      while (i > b && !is_punct(t[i - 1], "[")) --i;
      p.pointer_depth += 1;
      continue;
    }
    if (k.kind == tok_kind::punct && (k.text == "*" || k.text == "&")) break;
  }
  size_t type_end = name_at;
  if (name_at < e) {
    // A lone user type without a name ("Foo") keeps its word as the type.
    bool only_word = true;
    for (size_t i = b; i < name_at; ++i)
      if (!(t[i].kind == tok_kind::ident && decl_quals().count(t[i].text))) only_word = false;
    if (only_word) {
      type_end = name_at + 1;
    } else {
      p.name = t[name_at].text;
    }
  }
  p.type = join_tokens(t, b, type_end);
  p.base_type = base_type_of(p.type);
  p.pointer_depth += pointer_depth_of(p.type);
  // const before the last '*' qualifies the pointee.
  size_t last_star = e;
  for (size_t i = b; i < type_end; ++i)
    if (is_punct(t[i], "*")) last_star = i;
  if (last_star < e)
    for (size_t i = b; i < last_star; ++i)
      if (is_ident(t[i], "const")) p.is_const_pointee = true;
  return p;
}

// ---------------------------------------------------------------------------
// File scope: template headers, function definitions, enums, file-scope declarations.

struct file_parser {
  parsed_source& ps;
  const token_list& t;
  const size_t n;
  stmt_parser sp;
  size_t stmt_start = 0;  // where the current file-scope statement began
  std::vector<std::string> pending_template;
  size_t i = 0;

  explicit file_parser(parsed_source& p) : ps(p), t(p.lex.tokens), n(p.lex.tokens.size()), sp{t} {}

  // At "template <": the names of the parameters, for the function that follows.
  void read_template_header() {
    size_t c = match_angle(t, i + 1, n);
    pending_template.clear();
    // Parameter names: the identifier before each top-level ',' / '=' / the end.
    size_t j = i + 2;
    while (j < c) {
      size_t item_end = j;
      while (item_end < c && !is_punct(t[item_end], ",")) {
        if (opening(t[item_end])) item_end = match_close(t, item_end, c);
        ++item_end;
      }
      size_t name_end = item_end;
      for (size_t q = j; q < item_end; ++q)
        if (is_punct(t[q], "=")) {
          name_end = q;
          break;
        }
      if (name_end > j && t[name_end - 1].kind == tok_kind::ident) pending_template.push_back(t[name_end - 1].text);
      j = item_end + 1;
    }
    i = c < n ? c + 1 : n;
  }

  // The parameters between the parentheses at open and close, split at top-level
  // commas ("(void)" has none).
  void read_params(function_unit& f, size_t open, size_t close) {
    size_t pb = open + 1;
    for (size_t r = open + 1; r <= close && r < n; ++r) {
      if (r < close && opening(t[r])) {
        r = match_close(t, r, close);
        continue;
      }
      if (r == close || is_punct(t[r], ",")) {
        if (r > pb && !(r == pb + 1 && is_ident(t[pb], "void"))) f.params.push_back(read_param(t, pb, r));
        pb = r + 1;
      }
    }
  }

  // A function whose name is at name_tok and parameter list opens at open: a definition
  // (its body parsed into statements) or a declaration (skipped).
  void read_function(size_t name_tok, size_t open, bool is_kernel, long long bounds) {
    size_t close = match_close(t, open, n);
    size_t q = close + 1;
    while (q < n && !is_punct(t[q], "{") && !is_punct(t[q], ";")) ++q;
    if (q < n && is_punct(t[q], "{")) {
      size_t body_end = match_close(t, q, n);
      function_unit f;
      f.name = t[name_tok].text;
      f.is_kernel = is_kernel;
      f.launch_bounds = bounds;
      f.template_params = pending_template;
      read_params(f, open, close);
      f.body = {q + 1, std::min(body_end, n)};
      f.tree = sp.parse_block(f.body.b, f.body.e);
      ps.functions.push_back(std::move(f));
      i = std::min(body_end + 1, n);
    } else {
      i = std::min(q + 1, n);  // a declaration
    }
    pending_template.clear();
    stmt_start = i;
  }

  // At __global__ or __device__: a function definition or declaration (read, true), or a
  // __device__ variable (false: the statement handling reads it).
  bool read_device_entity() {
    size_t j = i;
    long long bounds = 0;
    bool is_kernel = false;
    size_t name_tok = n, open = n;
    for (; j < n; ++j) {
      const token& q = t[j];
      if (is_ident(q, "__global__")) is_kernel = true;
      if (is_punct(q, ";") || is_punct(q, "=") || is_punct(q, "{") || is_punct(q, "}")) break;
      if (is_punct(q, "(")) {
        const token* prev = j > 0 ? &t[j - 1] : nullptr;
        if (prev && prev->kind == tok_kind::ident &&
            (prev->text == "__launch_bounds__" || prev->text == "__align__" || prev->text == "alignas" ||
             prev->text == "__attribute__" || prev->text == "__declspec")) {
          size_t c = match_close(t, j, n);
          if (prev->text == "__launch_bounds__" && j + 1 < c) {
            long long v = 0;
            if (parse_int_literal(t[j + 1].text, v)) bounds = v;
          }
          j = c;
          continue;
        }
        if (prev && prev->kind == tok_kind::ident) {
          name_tok = j - 1;
          open = j;
        }
        break;
      }
    }
    if (open >= n) return false;
    read_function(name_tok, open, is_kernel, bounds);
    return true;
  }

  // The enumerators with a value of the enum body between open and close, as
  // constexpr ints at file scope.
  void read_enum_constants(size_t open, size_t c) {
    declaration d;
    d.type = "int";
    d.quals.push_back("constexpr");
    size_t q = open + 1;
    while (q < c) {
      size_t item_end = q;
      while (item_end < c && !is_punct(t[item_end], ",")) ++item_end;
      if (q + 2 < item_end && t[q].kind == tok_kind::ident && is_punct(t[q + 1], "=")) {
        declarator dd;
        dd.name = t[q].text;
        dd.name_tok = q;
        dd.has_init = true;
        dd.init = {q + 2, item_end};
        d.items.push_back(dd);
      }
      q = item_end + 1;
    }
    if (!d.items.empty()) ps.file_scope.push_back(d);
  }

  // At a '{' at file scope: extern "C" { and namespace X { are transparent; other
  // braces at file scope (host functions, structs, enums) are skipped, enums read for
  // constants.
  void read_file_scope_braces() {
    bool transparent = (i > 0 && t[i - 1].kind == tok_kind::string) || (i > 1 && is_ident(t[i - 2], "namespace")) ||
                       (i > 0 && is_ident(t[i - 1], "namespace"));
    if (transparent) {
      ++i;
      stmt_start = i;
      return;
    }
    size_t c = match_close(t, i, n);
    bool is_enum = false;
    for (size_t q = stmt_start; q < i; ++q)
      if (is_ident(t[q], "enum")) is_enum = true;
    if (is_enum) read_enum_constants(i, c);
    bool function_body =
        i > 0 && (is_punct(t[i - 1], ")") || is_ident(t[i - 1], "const") || is_ident(t[i - 1], "noexcept"));
    i = std::min(c + 1, n);
    if (function_body || !is_enum) {
      // After a function body the next statement starts; after a struct or enum
      // body the declaration continues to its ';'.
      if (function_body) stmt_start = i;
    }
  }

  void run() {
    while (i < n) {
      const token& k = t[i];
      if (is_ident(k, "template") && i + 1 < n && is_punct(t[i + 1], "<")) {
        read_template_header();
        continue;
      }
      if (k.kind == tok_kind::ident && (k.text == "__global__" || k.text == "__device__")) {
        // A function definition or declaration, or a __device__ variable.
        if (read_device_entity()) continue;
        // A variable: fall through to the statement handling below.
      }
      if (is_punct(k, "{")) {
        read_file_scope_braces();
        continue;
      }
      if (is_punct(k, "}")) {
        ++i;
        stmt_start = i;
        continue;
      }
      if (is_punct(k, ";")) {
        declaration d;
        if (i > stmt_start && parse_declaration(t, stmt_start, i, d)) ps.file_scope.push_back(d);
        ++i;
        stmt_start = i;
        pending_template.clear();
        continue;
      }
      ++i;
    }
  }
};

}  // namespace

parsed_source parse_source(std::string_view source) {
  parsed_source ps;
  ps.lex = lex_cuda(source);
  file_parser fp(ps);
  fp.run();
  return ps;
}

}  // namespace ks::features
