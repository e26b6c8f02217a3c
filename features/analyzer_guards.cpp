// Conditions of the per-function analysis (features/function_analyzer.hpp): which
// comparisons guard a global index, which branches split a warp, and the rules that
// read them: bounds checks (has_bounds_check), divergent branches
// (divergent_branches), tail handling (has_tail_handling) and alignment checks
// (vector_alignment_checked).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace ks::features::analysis {

bool function_analyzer::is_bounds_cmp(const expr_tree& x, int n) {
  const ex_node& k = x.at(n);
  if (k.kind != ex_kind::binary || !(k.op == "<" || k.op == "<=" || k.op == ">" || k.op == ">=")) return false;
  deps l = deps_of(x, k.kids[0]);
  deps r = deps_of(x, k.kids[1]);
  int tside, sside;
  if (l.thread && !r.thread) {
    tside = k.kids[0];
    sside = k.kids[1];
  } else if (r.thread && !l.thread) {
    tside = k.kids[1];
    sside = k.kids[0];
  } else {
    return false;
  }
  deps T = deps_of(x, tside), S = deps_of(x, sside);
  if (S.data || S.tree_loop || !S.loops.empty()) return false;
  if (T.data) return false;
  // A comparison with a constant, or with the block's own size (tid < blockDim.x / 2
  // picks half the block), guards a global index only.
  poly sp = poly_of(x, sside);
  bool constant = sp.is_const() || const_eval(x, sside).has_value();
  bool launch_only = sp.ok;
  for (auto& a : sp.atoms()) {
    // Every identifier of the atom must be blockDim/gridDim or a member after '.'.
    char prev = 0;
    for (size_t i = 0; i < a.size();) {
      char ch = a[i];
      if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
        size_t j = i;
        while (j < a.size() && (std::isalnum(static_cast<unsigned char>(a[j])) || a[j] == '_')) ++j;
        std::string word = a.substr(i, j - i);
        if (!(word == "blockDim" || word == "gridDim" || (prev == '.' && word.size() == 1))) launch_only = false;
        prev = 'a';
        i = j;
        continue;
      }
      if (ch != ' ') prev = ch;
      ++i;
    }
  }
  if ((constant || launch_only) && T.bd.empty()) return false;
  return true;
}

bool function_analyzer::cond_has_bounds(const expr_tree& x, int n) {
  if (n < 0) return false;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::binary && (k.op == "&&" || k.op == "||"))
    return cond_has_bounds(x, k.kids[0]) || cond_has_bounds(x, k.kids[1]);
  if (k.kind == ex_kind::unary && k.op == "!" && !k.kids.empty()) return cond_has_bounds(x, k.kids[0]);
  return is_bounds_cmp(x, n);
}

bool function_analyzer::cond_divergent(const expr_tree& x, int n) {
  if (n < 0) return false;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::binary && (k.op == "%" || k.op == "&")) {
    deps l = deps_of(x, k.kids[0]);
    if (l.lane && !l.data) {
      auto c = const_eval(x, k.kids[1]);
      if (!c) return true;
      if (k.op == "%" && *c != 0 && *c % 32 != 0) return true;
      if (k.op == "&" && *c >= 0 && *c < 31) return true;
    }
  }
  if (k.kind == ex_kind::binary && (k.op == "<" || k.op == "<=" || k.op == ">" || k.op == ">=")) {
    deps l = deps_of(x, k.kids[0]);
    deps r = deps_of(x, k.kids[1]);
    auto lc = const_eval(x, k.kids[0]);
    auto rc = const_eval(x, k.kids[1]);
    auto check = [&](const deps& lv, const deps& other, std::optional<long long> oc) {
      if (!lv.lane || lv.data || other.lane) return false;
      if (oc) return *oc > 0 && *oc < 32;
      return lv.lane_index && !other.data;
    };
    if (check(l, r, rc) || check(r, l, lc)) return true;
  }
  for (int kid : k.kids)
    if (cond_divergent(x, kid)) return true;
  return false;
}

// bounds_check: an if, loop or ternary condition that compares a thread-derived index
// with a size.
bool function_analyzer::is_bounds_check(const cond_rec& c) { return cond_has_bounds(*c.x, c.node); }

// divergent_branches: an if, while or switch condition that splits the lanes of a warp.
// Loop conditions and conditional expressions (which compile to selects) are not
// counted as divergent branches.
bool function_analyzer::is_divergent_branch(const cond_rec& c) {
  return c.kind != role_t::cond_for && c.kind != role_t::cond_ternary && cond_divergent(*c.x, c.node);
}

// A scalar global access of an array that is also accessed through a wider type: the
// elements a vector loop leaves over.
bool function_analyzer::has_scalar_tail_of_vector_access() const {
  std::map<std::string, int> widest;  // base → widest width
  for (auto& a : accesses_)
    if (a.space == space_t::global) widest[a.base] = std::max(widest[a.base], a.width);
  bool found = false;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.width == 1 && widest[a.base] > 1) found = true;
  return found;
}

// A bounds check guarding a global read that stages a shared tile: as the enclosing if,
// or as a ternary around the load. Every guard is asked (cond_has_bounds is memoised in
// the order of the questions).
bool function_analyzer::guards_staging_load(const staging& st) {
  bool found = false;
  for (auto& [g, reads] : st.staging_reads)
    for (auto* a : reads) {
      const item_rec& it = items_[static_cast<size_t>(a->item)];
      for (auto& gd : it.guards)
        if (cond_has_bounds(*gd.x, gd.node)) found = true;
    }
  for (auto& c : conds_) {
    // A ternary guarding a staging load.
    if (!cond_has_bounds(*c.x, c.node)) continue;
    for (auto& [g, reads] : st.staging_reads)
      for (auto* a : reads)
        if (a->x == c.x) found = true;
  }
  return found;
}

// has_tail_handling: with vector accesses, scalar accesses of the same arrays; with
// shared tiles, bounds-checked staging loads; otherwise any bounds check.
bool function_analyzer::has_tail_handling(const unit_facts& uf, const staging& st) {
  if (uf.vector_access) return has_scalar_tail_of_vector_access();
  if (uf.shared_tiles) return guards_staging_load(st);
  return uf.bounds_check;
}

// A condition testing a size against the vector width: n % w, n & (w - 1), or the
// common 16- and 8-byte forms.
bool function_analyzer::checks_size_for_vector_width(int w) const {
  bool size_check = false;
  for (auto& c : conds_) {
    std::function<void(int)> scan = [&](int n) {
      if (n < 0) return;
      const ex_node& k = c.x->at(n);
      if (k.kind == ex_kind::binary && (k.op == "%" || k.op == "&")) {
        auto v = const_eval(*c.x, k.kids[1]);
        if (v && ((k.op == "%" && (*v == w || *v == 16 || *v == 8)) ||
                  (k.op == "&" && (*v == w - 1 || *v == 15 || *v == 7))))
          size_check = true;
      }
      for (int kid : k.kids) scan(kid);
    };
    scan(c.node);
  }
  return size_check;
}

// vector_alignment_checked (vector accesses only): a pointer cast to an integer under
// % or &, a call to an *align* helper with a pointer, or a size check with a scalar
// tail.
bool function_analyzer::is_alignment_checked(const unit_facts& uf) const {
  if (!uf.vector_access) return false;
  return ptr_int_check_ || align_call_ || (checks_size_for_vector_width(uf.vector_width) && uf.tail);
}

}  // namespace ks::features::analysis
