#include "features/source_analysis.hpp"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "features/function_analyzer.hpp"
#include "features/intrinsic_names.hpp"

namespace ks::features {

namespace {

using analysis::asm_uses_approx_math;
using analysis::asm_uses_tensor_cores;
using analysis::fast_math_names;
using analysis::function_analyzer;
using analysis::is_atomic;
using analysis::is_half2_intrinsic;
using analysis::is_reduce_sync_intrinsic;
using analysis::is_reducing_shuffle;
using analysis::is_shuffle;
using analysis::is_syncthreads;
using analysis::names_tensor_cores;
using analysis::space_t;
using analysis::transcendental_names;
using analysis::var_rec;

// ===========================================================================
// File-level constants and variables.

// A tiny evaluator over a #define's own tokens: integer literals, constants known so
// far, casts, unary - and +, and + - * / % << >> on operands within 2^40.
std::optional<long long> eval_define(const expr_tree& x, int n, int depth,
                                     const std::map<std::string, long long>& known) {
  if (n < 0 || depth > 32) return std::nullopt;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::number:
      if (k.is_int) return k.ival;
      return std::nullopt;
    case ex_kind::ident: {
      auto it = known.find(k.op);
      if (it != known.end()) return it->second;
      return std::nullopt;
    }
    case ex_kind::cast:
      return eval_define(x, k.kids[0], depth + 1, known);
    case ex_kind::unary: {
      if (k.kids.empty()) return std::nullopt;
      auto a = eval_define(x, k.kids[0], depth + 1, known);
      if (!a) return std::nullopt;
      if (k.op == "-") return -*a;
      if (k.op == "+") return *a;
      return std::nullopt;
    }
    case ex_kind::binary: {
      auto a = eval_define(x, k.kids[0], depth + 1, known), b = eval_define(x, k.kids[1], depth + 1, known);
      if (!a || !b || std::llabs(*a) > (1LL << 40) || std::llabs(*b) > (1LL << 40)) return std::nullopt;
      if (k.op == "+") return *a + *b;
      if (k.op == "-") return *a - *b;
      if (k.op == "*") return *a * *b;
      if (k.op == "/" && *b != 0) return *a / *b;
      if (k.op == "%" && *b != 0) return *a % *b;
      if (k.op == "<<" && *b >= 0 && *b < 40) return *a << *b;
      if (k.op == ">>" && *b >= 0 && *b < 63) return *a >> *b;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// The value of a file-scope constant's initialiser: integer literals, constants known
// so far, casts, and + - * / << on operands within 2^40.
std::optional<long long> eval_constant_init(const expr_tree& x, int n, const std::map<std::string, long long>& known) {
  if (n < 0) return std::nullopt;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::number) return k.is_int ? std::optional<long long>(k.ival) : std::nullopt;
  if (k.kind == ex_kind::ident) {
    auto f = known.find(k.op);
    return f == known.end() ? std::nullopt : std::optional<long long>(f->second);
  }
  if (k.kind == ex_kind::cast) return eval_constant_init(x, k.kids[0], known);
  if (k.kind == ex_kind::binary) {
    auto a = eval_constant_init(x, k.kids[0], known), b = eval_constant_init(x, k.kids[1], known);
    if (!a || !b || std::llabs(*a) > (1LL << 40) || std::llabs(*b) > (1LL << 40)) return std::nullopt;
    if (k.op == "+") return *a + *b;
    if (k.op == "-") return *a - *b;
    if (k.op == "*") return *a * *b;
    if (k.op == "/" && *b != 0) return *a / *b;
    if (k.op == "<<" && *b >= 0 && *b < 40) return *a << *b;
  }
  return std::nullopt;
}

// #define NAME expr, evaluated in order with what is known so far (several rounds
// for macros that refer to later ones).
void collect_defines(const parsed_source& ps, std::map<std::string, long long>& out) {
  for (int round = 0; round < 4; ++round) {
    for (auto& [name, toks] : ps.lex.defines) {
      if (out.count(name) || toks.empty()) continue;
      expr_tree x = parse_expression(toks, 0, toks.size());
      auto v = eval_define(x, x.root, 0, out);
      if (v) out[name] = *v;
    }
  }
}

// File-scope constexpr / const integers and enumerators.
void collect_file_scope_constants(const parsed_source& ps, std::map<std::string, long long>& out) {
  for (auto& d : ps.file_scope) {
    if (!(d.has_qual("constexpr") || d.has_qual("const"))) continue;
    for (auto& it : d.items) {
      if (!it.has_init || !it.dims.empty() || it.pointer_depth > 0) continue;
      expr_tree x = parse_expression(ps.lex.tokens, it.init.b, it.init.e);
      auto v = eval_constant_init(x, x.root, out);
      if (v) out[it.name] = *v;
    }
  }
}

// The integer constants of the file: macros first, then constants and enumerators.
void collect_constants(const parsed_source& ps, std::map<std::string, long long>& out) {
  collect_defines(ps, out);
  collect_file_scope_constants(ps, out);
}

void collect_file_vars(const parsed_source& ps, const std::map<std::string, long long>& constants,
                       std::map<std::string, var_rec>& out) {
  for (auto& d : ps.file_scope) {
    space_t sp = d.has_qual("__shared__")     ? space_t::shared
                 : d.has_qual("__constant__") ? space_t::constant
                 : d.has_qual("__device__")   ? space_t::global
                                              : space_t::none;
    if (sp == space_t::none) continue;
    for (auto& it : d.items) {
      var_rec v;
      v.name = it.name;
      v.key = it.name;
      v.type = base_type_of(d.type);
      v.ptr = it.pointer_depth;
      v.elem = shape_of_type(v.type);
      v.is_array = !it.dims.empty();
      v.space = sp;
      for (auto& dim : it.dims) {
        long long val = -1;
        if (dim.e == dim.b + 1) {
          const token& k = ps.lex.tokens[dim.b];
          long long iv = 0;
          if (k.kind == tok_kind::number && parse_int_literal(k.text, iv))
            val = iv;
          else if (k.kind == tok_kind::ident && constants.count(k.text))
            val = constants.at(k.text);
        }
        v.dims.push_back(val);
      }
      out[it.name] = v;
    }
  }
}

// A string token of a function body (inline asm): tensor-core and approximate
// instructions.
void scan_string(const token& k, lexical_facts& lf) {
  if (asm_uses_tensor_cores(k.text)) lf.tensor_cores = true;
  if (asm_uses_approx_math(k.text)) lf.fast_math = true;
}

// The identifier at i of a function body: calls of transcendental, fast-math, shuffle,
// atomic, reduce and barrier functions; tensor-core and vector-type names.
void scan_identifier(const token_list& t, size_t i, lexical_facts& lf) {
  const token& k = t[i];
  bool call = i + 1 < t.size() && is_punct(t[i + 1], "(");
  // A member call such as wmma::mma_sync is lexed as wmma :: mma_sync.
  const std::string& w = k.text;
  bool member_access = i > 0 && (is_punct(t[i - 1], ".") || is_punct(t[i - 1], "->"));
  if (call && !member_access && transcendental_names().count(w)) ++lf.transcendental;
  if (call && !member_access && fast_math_names().count(w)) lf.fast_math = true;
  if (call && is_shuffle(w)) {
    ++lf.shuffles;
    if (is_reducing_shuffle(w)) lf.shuffle_reduction = true;
  }
  if (call && is_atomic(w)) ++lf.atomics;
  if (call && is_reduce_sync_intrinsic(w)) lf.reduce_intrinsics = true;
  if (call && w == "reduce" && i > 1 && is_punct(t[i - 1], "::")) lf.reduce_intrinsics = true;
  if (call && is_syncthreads(w)) ++lf.syncthreads;
  if (w == "__shared__") lf.shared_decl = true;
  if (names_tensor_cores(w)) lf.tensor_cores = true;
  if (is_vector_type(w)) lf.vector_types = true;
  if (w.rfind("make_", 0) == 0 && is_vector_type(w.substr(5))) lf.vector_types = true;
  if (call && is_half2_intrinsic(w)) lf.vector_types = true;
}

// Token-level facts over all function bodies.
lexical_facts scan_lexical(const parsed_source& ps) {
  lexical_facts lf;
  const token_list& t = ps.lex.tokens;
  for (auto& d : ps.file_scope)
    if (d.has_qual("__shared__")) lf.shared_decl = true;
  for (auto& f : ps.functions) {
    for (size_t i = f.body.b; i < f.body.e && i < t.size(); ++i) {
      if (t[i].kind == tok_kind::string)
        scan_string(t[i], lf);
      else if (t[i].kind == tok_kind::ident)
        scan_identifier(t, i, lf);
    }
    // Vector types in the parameters count too.
    for (auto& p : f.params)
      if (is_vector_type(p.base_type)) lf.vector_types = true;
  }
  return lf;
}

}  // namespace

source_facts analyze_source(const parsed_source& ps, const std::map<std::string, launch_info>& launches,
                            double nominal_extent) {
  source_facts sf;
  std::map<std::string, long long> constants;
  collect_constants(ps, constants);
  std::map<std::string, var_rec> file_vars;
  collect_file_vars(ps, constants, file_vars);
  sf.lex = scan_lexical(ps);
  for (auto& f : ps.functions) {
    auto it = launches.find(f.name);
    function_analyzer a(ps, f, constants, file_vars, it == launches.end() ? nullptr : &it->second, nominal_extent);
    sf.units.push_back(a.run());
  }
  return sf;
}

}  // namespace ks::features
