#include "features/source_analysis.hpp"

#include <cstdlib>
#include <functional>
#include <optional>

#include "features/function_analyzer.hpp"
#include "features/intrinsic_names.hpp"

namespace ks::features {

namespace {

using analysis::fast_math_names;
using analysis::function_analyzer;
using analysis::is_atomic;
using analysis::is_reducing_shuffle;
using analysis::is_shuffle;
using analysis::space_t;
using analysis::transcendental_names;
using analysis::var_rec;

// ===========================================================================
// File-level constants and variables.

void collect_constants(const parsed_source& ps, std::map<std::string, long long>& out) {
  // #define NAME expr, evaluated in order with what is known so far (several rounds
  // for macros that refer to later ones).
  for (int round = 0; round < 4; ++round) {
    for (auto& [name, toks] : ps.lex.defines) {
      if (out.count(name) || toks.empty()) continue;
      expr_tree x = parse_expression(toks, 0, toks.size());
      // A tiny evaluator over the define's own tokens.
      std::function<std::optional<long long>(int, int)> ev = [&](int n, int depth) -> std::optional<long long> {
        if (n < 0 || depth > 32) return std::nullopt;
        const ex_node& k = x.at(n);
        switch (k.kind) {
          case ex_kind::number:
            if (k.is_int) return k.ival;
            return std::nullopt;
          case ex_kind::ident: {
            auto it = out.find(k.op);
            if (it != out.end()) return it->second;
            return std::nullopt;
          }
          case ex_kind::cast:
            return ev(k.kids[0], depth + 1);
          case ex_kind::unary: {
            if (k.kids.empty()) return std::nullopt;
            auto a = ev(k.kids[0], depth + 1);
            if (!a) return std::nullopt;
            if (k.op == "-") return -*a;
            if (k.op == "+") return *a;
            return std::nullopt;
          }
          case ex_kind::binary: {
            auto a = ev(k.kids[0], depth + 1), b = ev(k.kids[1], depth + 1);
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
      };
      auto v = ev(x.root, 0);
      if (v) out[name] = *v;
    }
  }
  // File-scope constexpr / const integers and enumerators.
  for (auto& d : ps.file_scope) {
    if (!(d.has_qual("constexpr") || d.has_qual("const"))) continue;
    for (auto& it : d.items) {
      if (!it.has_init || !it.dims.empty() || it.pointer_depth > 0) continue;
      expr_tree x = parse_expression(ps.lex.tokens, it.init.b, it.init.e);
      std::function<std::optional<long long>(int)> ev = [&](int n) -> std::optional<long long> {
        if (n < 0) return std::nullopt;
        const ex_node& k = x.at(n);
        if (k.kind == ex_kind::number) return k.is_int ? std::optional<long long>(k.ival) : std::nullopt;
        if (k.kind == ex_kind::ident) {
          auto f = out.find(k.op);
          return f == out.end() ? std::nullopt : std::optional<long long>(f->second);
        }
        if (k.kind == ex_kind::cast) return ev(k.kids[0]);
        if (k.kind == ex_kind::binary) {
          auto a = ev(k.kids[0]), b = ev(k.kids[1]);
          if (!a || !b || std::llabs(*a) > (1LL << 40) || std::llabs(*b) > (1LL << 40)) return std::nullopt;
          if (k.op == "+") return *a + *b;
          if (k.op == "-") return *a - *b;
          if (k.op == "*") return *a * *b;
          if (k.op == "/" && *b != 0) return *a / *b;
          if (k.op == "<<" && *b >= 0 && *b < 40) return *a << *b;
        }
        return std::nullopt;
      };
      auto v = ev(x.root);
      if (v) out[it.name] = *v;
    }
  }
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
          if (k.kind == tok_kind::number && parse_int_literal(k.text, iv)) val = iv;
          else if (k.kind == tok_kind::ident && constants.count(k.text)) val = constants.at(k.text);
        }
        v.dims.push_back(val);
      }
      out[it.name] = v;
    }
  }
}

// Token-level facts over all function bodies.
lexical_facts scan_lexical(const parsed_source& ps) {
  lexical_facts lf;
  const token_list& t = ps.lex.tokens;
  for (auto& d : ps.file_scope)
    if (d.has_qual("__shared__")) lf.shared_decl = true;
  for (auto& f : ps.functions) {
    for (size_t i = f.body.b; i < f.body.e && i < t.size(); ++i) {
      const token& k = t[i];
      if (k.kind == tok_kind::string) {
        if (k.text.find("mma.sync") != std::string::npos || k.text.find("wgmma") != std::string::npos ||
            k.text.find("wmma.") != std::string::npos)
          lf.tensor_cores = true;
        if (k.text.find(".approx") != std::string::npos) lf.fast_math = true;
        continue;
      }
      if (k.kind != tok_kind::ident) continue;
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
      if (call && (w.rfind("__reduce_", 0) == 0 && w.find("_sync") != std::string::npos))
        lf.reduce_intrinsics = true;
      if (call && w == "reduce" && i > 1 && is_punct(t[i - 1], "::")) lf.reduce_intrinsics = true;
      if (call && (w == "__syncthreads" || w == "__syncthreads_count" || w == "__syncthreads_and" ||
                   w == "__syncthreads_or"))
        ++lf.syncthreads;
      if (w == "__shared__") lf.shared_decl = true;
      if (w == "wmma" || w == "mma_sync" || w == "__hmma_m16n16k16_mma_f32f32" || w == "wgmma")
        lf.tensor_cores = true;
      if (is_vector_type(w)) lf.vector_types = true;
      if (w.rfind("make_", 0) == 0 && is_vector_type(w.substr(5))) lf.vector_types = true;
      if (call && (w == "__hadd2" || w == "__hmul2" || w == "__hfma2" || w == "__hsub2" ||
                   w == "__floats2half2_rn" || w == "__float2half2_rn" || w == "__half22float2" ||
                   w == "__float22half2_rn" || w == "__hmax2" || w == "__hmin2"))
        lf.vector_types = true;
    }
    // Vector types in the parameters count too.
    for (auto& p : f.params)
      if (is_vector_type(p.base_type)) lf.vector_types = true;
  }
  return lf;
}

}  // namespace

source_facts analyze_source(const parsed_source& ps,
                            const std::map<std::string, launch_info>& launches,
                            double nominal_extent) {
  source_facts sf;
  std::map<std::string, long long> constants;
  collect_constants(ps, constants);
  std::map<std::string, var_rec> file_vars;
  collect_file_vars(ps, constants, file_vars);
  sf.lex = scan_lexical(ps);
  for (auto& f : ps.functions) {
    auto it = launches.find(f.name);
    function_analyzer a(ps, f, constants, file_vars, it == launches.end() ? nullptr : &it->second,
                        nominal_extent);
    sf.units.push_back(a.run());
  }
  return sf;
}

}  // namespace ks::features
