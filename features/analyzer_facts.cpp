// Derived facts of the per-function analysis (features/function_analyzer.hpp).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

// ---------------------------------------------------------------------------
// Derived facts.

long long function_analyzer::trip_of(int loop) const {
  return loops_[static_cast<size_t>(loop)].trip;
}

void function_analyzer::derive_loops() {
  for (auto& L : loops_) {
    if (L.var < 0) continue;
    // Step shape.
    if (L.step) {
      const ex_node& s = L.step->at(L.step->root);
      auto is_var = [&](int n) {
        if (n < 0) return false;
        const ex_node& q = L.step->at(n);
        if (q.kind != ex_kind::ident) return false;
        auto b = binding_.find(q.toks.b);
        return b != binding_.end() && b->second == L.var;
      };
      if ((s.kind == ex_kind::postfix || s.kind == ex_kind::unary) && !s.kids.empty() &&
          is_var(s.kids[0])) {
        L.step_const = s.op == "++" ? 1 : s.op == "--" ? -1 : 0;
      } else if (s.kind == ex_kind::binary && is_var(s.kids[0])) {
        auto c = const_eval(*L.step, s.kids[1]);
        if (s.op == "+=" || s.op == "-=") {
          if (c) L.step_const = s.op == "+=" ? *c : -*c;
        } else if ((s.op == ">>=" && c && *c >= 1) || (s.op == "/=" && c && *c >= 2) ||
                   (s.op == "<<=" && c && *c >= 1) || (s.op == "*=" && c && *c >= 2)) {
          L.tree = true;
        } else if (s.op == "=") {
          const ex_node& r = L.step->at(s.kids[1]);
          if (r.kind == ex_kind::binary && is_var(r.kids[0])) {
            auto c2 = const_eval(*L.step, r.kids[1]);
            if ((r.op == "/" || r.op == ">>" || r.op == "*" || r.op == "<<") && c2 &&
                ((r.op == "/" || r.op == "*") ? *c2 >= 2 : *c2 >= 1))
              L.tree = true;
            else if ((r.op == "+" || r.op == "-") && c2)
              L.step_const = r.op == "+" ? *c2 : -*c2;
          }
        }
      }
    }
  }
  // Thread-ness needs the tree flags (var_deps reads them): compute after the above.
  for (auto& L : loops_) {
    if (L.var < 0) continue;
    deps d = var_deps(L.var);
    L.thread_var = d.thread;
    if (L.step && L.thread_var) {
      deps s = deps_of(*L.step, L.step->root);
      if (s.grid) L.grid_stride = true;
    }
    // Trip count: init constant, condition var < / <= / > / >= constant, constant step.
    const var_rec& v = vars_[static_cast<size_t>(L.var)];
    std::optional<long long> init;
    if (v.loop_id == L.id && v.has_init && v.init_tree) init = const_eval(*v.init_tree, v.init_node);
    if (!init && L.init) {
      const ex_node& r = L.init->at(L.init->root);
      if (r.kind == ex_kind::binary && r.op == "=") init = const_eval(*L.init, r.kids[1]);
    }
    if (init && L.cond && L.step_const != 0) {
      const ex_node& c = L.cond->at(L.cond->root);
      if (c.kind == ex_kind::binary && c.kids.size() == 2) {
        const ex_node& l = L.cond->at(c.kids[0]);
        auto b = binding_.find(l.toks.b);
        if (l.kind == ex_kind::ident && b != binding_.end() && b->second == L.var) {
          auto bound = const_eval(*L.cond, c.kids[1]);
          // A bound that is a kernel parameter: its value in the resolved launch.
          const ex_node& rb = L.cond->at(c.kids[1]);
          if (!bound && launch_ && rb.kind == ex_kind::ident) {
            auto pb = binding_.find(rb.toks.b);
            if (pb != binding_.end() && vars_[static_cast<size_t>(pb->second)].is_param) {
              auto v = launch_->int_params.find(rb.op);
              if (v != launch_->int_params.end()) {
                bound = v->second;
                L.trip_from_launch = true;
              }
            }
          }
          if (bound) {
            long long a = *init, B = *bound, st = L.step_const;
            long long trip = -1;
            if (c.op == "<" && st > 0) trip = B > a ? (B - a + st - 1) / st : 0;
            else if (c.op == "<=" && st > 0) trip = B >= a ? (B - a) / st + 1 : 0;
            else if (c.op == ">" && st < 0) trip = a > B ? (a - B + (-st) - 1) / (-st) : 0;
            else if (c.op == ">=" && st < 0) trip = a >= B ? (a - B) / (-st) + 1 : 0;
            else if (c.op == "!=" && st != 0 && (B - a) % st == 0 && (B - a) / st >= 0)
              trip = (B - a) / st;
            L.trip = trip;
          }
        }
      }
    }
  }
}

std::set<std::string> function_analyzer::thread_atoms(const poly& p) const {
  std::set<std::string> s;
  for (auto& a : p.atoms()) {
    auto it = atom_deps_.find(a);
    if (it != atom_deps_.end() && it->second.thread) s.insert(a);
  }
  return s;
}

std::set<char> function_analyzer::block_dims(const poly& p) const {
  std::set<char> s;
  for (auto& a : p.atoms()) {
    auto it = atom_deps_.find(a);
    if (it != atom_deps_.end()) s.insert(it->second.bd.begin(), it->second.bd.end());
  }
  return s;
}

bool function_analyzer::window_var(const access_rec& a, int loop) const {
  const loop_rec& L = loops_[static_cast<size_t>(loop)];
  // A window slides one position at a time; a loop stepping by a tile (k0 += 32)
  // visits disjoint tiles even when its variable has the thread's stride.
  if (L.var < 0 || L.thread_var || L.tree || !a.index.ok) return false;
  if (L.step_const != 1 && L.step_const != -1) return false;
  std::string va = var_atom(L.var);
  if (!a.index.has(va)) return false;
  poly cv = a.index.coeff(va);
  if (cv.is_zero()) return false;
  for (auto& ta : thread_atoms(a.index)) {
    if (ta == va) continue;
    poly ct = a.index.coeff(ta);
    if (!ct.is_zero() && ct == cv) return true;
  }
  return false;
}

// The index with each reassigned, thread-derived variable (a grid-stride loop's `i`)
// replaced by its initial value: neighbouring threads then differ as in the first
// iteration, which is what decides whether two reads overlap across threads.
poly function_analyzer::anchored(const poly& p) {
  if (!p.ok) return p;
  poly r;
  for (auto& [m, c] : p.t) {
    poly term = poly::cst(c);
    for (auto& a : m) {
      poly f = poly::atom(a);
      size_t hash = a.rfind('#');
      if (hash != std::string::npos && a[0] != '(') {
        int v = std::atoi(a.c_str() + hash + 1);
        if (v >= 0 && static_cast<size_t>(v) < vars_.size()) {
          const var_rec& vr = vars_[static_cast<size_t>(v)];
          if (vr.key == a && vr.assigns > 0 && vr.has_init && vr.init_tree && var_deps(v).thread) {
            poly init = poly_of(*vr.init_tree, vr.init_node);
            if (init.ok) f = init;
          }
        }
      }
      term = mul(term, f);
    }
    r = add(r, term);
  }
  return r.ok ? r : p;
}

// Neighbours: reads of one array (same access width) whose indices differ by a small
// multiple (1 to 3) of the stride of a thread coordinate they share — stencil taps.
// Found by hashing the anchored indices, so that a kernel with hundreds of reads is
// analysed in linear time.
void function_analyzer::index_neighbours() {
  anch_.assign(accesses_.size(), poly::bad());
  anch_key_.assign(accesses_.size(), std::string());
  by_anch_.clear();
  for (size_t i = 0; i < accesses_.size(); ++i) {
    const access_rec& a = accesses_[i];
    if (!a.index.ok) continue;
    anch_[i] = anchored(a.index);
    if (!anch_[i].ok) continue;
    anch_key_[i] = a.base + "|" + std::to_string(a.width) + "|" + anch_[i].str();
    by_anch_[anch_key_[i]].push_back(i);
  }
}

std::vector<size_t> function_analyzer::neighbours_of(size_t i) {
  std::vector<size_t> out;
  const access_rec& a = accesses_[i];
  const poly& pa = anch_[i];
  if (!pa.ok || anch_key_[i].empty()) return out;
  for (auto& t : thread_atoms(pa)) {
    poly c = pa.coeff(t);
    if (c.is_zero() || !c.ok) continue;
    for (long long m = -3; m <= 3; ++m) {
      if (m == 0) continue;
      poly q = add(pa, scale(c, m));
      if (!q.ok) continue;
      auto it = by_anch_.find(a.base + "|" + std::to_string(a.width) + "|" + q.str());
      if (it == by_anch_.end()) continue;
      for (size_t j : it->second)
        if (j != i) out.push_back(j);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool function_analyzer::is_bounds_cmp(const expr_tree& x, int n) {
  const ex_node& k = x.at(n);
  if (k.kind != ex_kind::binary ||
      !(k.op == "<" || k.op == "<=" || k.op == ">" || k.op == ">="))
    return false;
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
        if (!(word == "blockDim" || word == "gridDim" || (prev == '.' && word.size() == 1)))
          launch_only = false;
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
  if (k.kind == ex_kind::binary &&
      (k.op == "<" || k.op == "<=" || k.op == ">" || k.op == ">=")) {
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

int function_analyzer::find_product(const expr_tree& x, int n, int& f1, int& f2) const {
  if (n < 0) return 0;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::binary && k.op == "*") {
    f1 = k.kids[0];
    f2 = k.kids[1];
    return 1;
  }
  if (k.kind == ex_kind::call) {
    std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
    if ((name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fmaf_rz" ||
         name == "__fma_rn" || name == "__hfma" || name == "__hfma2" || name == "__fmul_rn" ||
         name == "__hmul" || name == "__hmul2") &&
        k.kids.size() >= 3) {
      f1 = k.kids[1];
      f2 = k.kids[2];
      return 1;
    }
  }
  if (k.kind == ex_kind::binary && (k.op == "+" || k.op == "-"))
    return find_product(x, k.kids[0], f1, f2) || find_product(x, k.kids[1], f1, f2);
  if (k.kind == ex_kind::cast || (k.kind == ex_kind::unary && k.op == "-"))
    return find_product(x, k.kids[0], f1, f2);
  return 0;
}

function_analyzer::accumulation function_analyzer::accumulation_of(const assign_rec& as) {
  accumulation r;
  const expr_tree& x = *as.x;
  // Loop headers and loop variables (k0 += TILE) advance; they do not accumulate.
  if (as.item >= 0 && items_[static_cast<size_t>(as.item)].role == role_t::loop_step) return r;
  if (as.var >= 0 && vars_[static_cast<size_t>(as.var)].loop_id >= 0) return r;
  if (as.op == "+=" || as.op == "-=") {
    r.yes = true;
    find_product(x, as.rhs, r.f1, r.f2);
    return r;
  }
  if (as.op == "*=") {
    r.yes = true;
    return r;
  }
  if (as.op != "=") return r;
  // acc = acc + a*b, acc = fmaf(a, b, acc), m = fmaxf(m, v)
  std::string lhs_text = node_text(t_, x, as.lhs);
  std::function<bool(int)> mentions_lhs = [&](int n) -> bool {
    if (n < 0) return false;
    if (node_text(t_, x, n) == lhs_text) return true;
    const ex_node& k = x.at(n);
    if (k.kind == ex_kind::cast) return mentions_lhs(k.kids[0]);
    return false;
  };
  const ex_node& k = x.at(as.rhs);
  if (k.kind == ex_kind::binary && (k.op == "+" || k.op == "-")) {
    if (mentions_lhs(k.kids[0])) {
      r.yes = true;
      find_product(x, k.kids[1], r.f1, r.f2);
    } else if (k.op == "+" && mentions_lhs(k.kids[1])) {
      r.yes = true;
      find_product(x, k.kids[0], r.f1, r.f2);
    }
    return r;
  }
  if (k.kind == ex_kind::call) {
    std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
    bool any = false;
    for (size_t i = 1; i < k.kids.size(); ++i)
      if (mentions_lhs(k.kids[i])) any = true;
    if (!any) return r;
    if ((name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fmaf_rz" ||
         name == "__fma_rn" || name == "__hfma" || name == "__hfma2") &&
        k.kids.size() >= 4 && mentions_lhs(k.kids[3])) {
      r.yes = true;
      r.f1 = k.kids[1];
      r.f2 = k.kids[2];
      return r;
    }
    if (name == "fmaxf" || name == "fminf" || name == "max" || name == "min" ||
        name == "fmax" || name == "fmin" || name == "__hmax" || name == "__hmin" ||
        name == "__hadd" || name == "__hadd2" || name == "__fadd_rn") {
      r.yes = true;
      return r;
    }
  }
  return r;
}

}  // namespace ks::features::analysis
