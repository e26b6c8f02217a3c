// Values of the per-function analysis (features/function_analyzer.hpp).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

// ---------------------------------------------------------------------------
// Values: constants, dependencies, polynomials, memory sources.

std::optional<long long> function_analyzer::const_eval(const expr_tree& x, int n, int depth) const {
  if (n < 0 || depth > 32) return std::nullopt;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::number:
      if (k.is_int) return k.ival;
      return std::nullopt;
    case ex_kind::ident: {
      if (k.op == "warpSize") return 32;
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        const var_rec& v = vars_[static_cast<size_t>(b->second)];
        if (expandable(v)) return const_eval(*v.init_tree, v.init_node, depth + 1);
        return std::nullopt;
      }
      auto c = constants_.find(last_name(k.op));
      if (c != constants_.end()) return c->second;
      return std::nullopt;
    }
    case ex_kind::cast:
      return const_eval(x, k.kids[0], depth + 1);
    case ex_kind::unary: {
      if (k.kids.empty()) return std::nullopt;
      auto a = const_eval(x, k.kids[0], depth + 1);
      if (!a) return std::nullopt;
      if (k.op == "-") return -*a;
      if (k.op == "+") return *a;
      if (k.op == "~") return ~*a;
      if (k.op == "!") return *a == 0 ? 1 : 0;
      return std::nullopt;
    }
    case ex_kind::binary: {
      auto a = const_eval(x, k.kids[0], depth + 1);
      auto b = const_eval(x, k.kids[1], depth + 1);
      if (!a || !b) return std::nullopt;
      long long l = *a, r = *b;
      if (std::llabs(l) > kCoefLimit || std::llabs(r) > kCoefLimit) return std::nullopt;
      if (k.op == "+") return l + r;
      if (k.op == "-") return l - r;
      if (k.op == "*")
        return std::llabs(l) < (1LL << 31) && std::llabs(r) < (1LL << 31) ? std::optional<long long>(l * r)
                                                                          : std::nullopt;
      if (k.op == "/") return r == 0 ? std::nullopt : std::optional<long long>(l / r);
      if (k.op == "%") return r == 0 ? std::nullopt : std::optional<long long>(l % r);
      if (k.op == "<<") return r >= 0 && r < 40 ? std::optional<long long>(l << r) : std::nullopt;
      if (k.op == ">>") return r >= 0 && r < 63 ? std::optional<long long>(l >> r) : std::nullopt;
      if (k.op == "&") return l & r;
      if (k.op == "|") return l | r;
      if (k.op == "^") return l ^ r;
      if (k.op == "<") return l < r;
      if (k.op == ">") return l > r;
      if (k.op == "<=") return l <= r;
      if (k.op == ">=") return l >= r;
      if (k.op == "==") return l == r;
      if (k.op == "!=") return l != r;
      return std::nullopt;
    }
    case ex_kind::ternary: {
      auto c = const_eval(x, k.kids[0], depth + 1);
      if (!c) return std::nullopt;
      return const_eval(x, k.kids[*c ? 1 : 2], depth + 1);
    }
    case ex_kind::call: {
      std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
      if ((name == "min" || name == "max") && k.kids.size() == 3) {
        auto a = const_eval(x, k.kids[1], depth + 1);
        auto b = const_eval(x, k.kids[2], depth + 1);
        if (!a || !b) return std::nullopt;
        return name == "min" ? std::min(*a, *b) : std::max(*a, *b);
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

deps builtin_deps(const std::string& obj, const std::string& member) {
  deps d;
  char dim = member.size() == 1 ? member[0] : 'x';
  if (obj == "threadIdx") {
    d.thread = true;
    d.lane = true;
    d.td.insert(dim);
  } else if (obj == "blockIdx") {
    d.thread = true;
    d.bd.insert(dim);
  } else if (obj == "gridDim") {
    d.grid = true;
  }
  return d;
}

deps function_analyzer::var_deps(int v) {
  var_rec& r = vars_[static_cast<size_t>(v)];
  if (r.deps_state == 2) return r.d;
  if (r.deps_state == 1 || var_depth_ > 64) return deps{};  // a cycle, or a pathological chain
  struct guard {
    int& d;
    explicit guard(int& x) : d(x) { ++d; }
    ~guard() { --d; }
  } g(var_depth_);
  r.deps_state = 1;
  deps d;
  bool lane_index = false;
  if (r.has_init && r.init_tree) {
    deps i = deps_of(*r.init_tree, r.init_node);
    lane_index = i.lane_index;
    d.merge(i);
  }
  for (auto& [x, n] : r.values)
    if (n >= 0) d.merge(deps_of(*x, n));
  d.lane_index = lane_index && r.assigns == 0;
  if (r.loop_id >= 0) {
    const loop_rec& L = loops_[static_cast<size_t>(r.loop_id)];
    if (L.step) d.merge(deps_of(*L.step, L.step->root));
    d.lane_index = false;
    if (!d.thread) d.loops.insert(r.loop_id);
    if (L.tree) d.tree_loop = true;
  }
  r.d = d;
  r.deps_state = 2;
  return d;
}

deps function_analyzer::deps_of(const expr_tree& x, int n) {
  if (n < 0) return {};
  auto key = std::make_pair(&x, n);
  auto memo = deps_memo_.find(key);
  if (memo != deps_memo_.end()) return memo->second;
  const ex_node& k = x.at(n);
  deps d;
  switch (k.kind) {
    case ex_kind::number:
    case ex_kind::string:
    case ex_kind::unknown:
      break;
    case ex_kind::ident: {
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        d = var_deps(b->second);
      } else if (k.op == "threadIdx" || k.op == "blockIdx" || k.op == "gridDim") {
        for (const char* m : {"x", "y", "z"}) d.merge(builtin_deps(k.op, m));
      }
      break;
    }
    case ex_kind::member: {
      const ex_node& o = x.at(k.kids[0]);
      if (o.kind == ex_kind::ident && binding_.find(o.toks.b) == binding_.end() &&
          (o.op == "threadIdx" || o.op == "blockIdx" || o.op == "gridDim" || o.op == "blockDim")) {
        d = builtin_deps(o.op, k.op);
      } else {
        d = deps_of(x, k.kids[0]);
      }
      break;
    }
    case ex_kind::call: {
      std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
      for (size_t i = 1; i < k.kids.size(); ++i) d.merge(deps_of(x, k.kids[i]));
      if (x.at(k.kids[0]).kind == ex_kind::member) {
        const std::string& m = x.at(k.kids[0]).op;
        if (m == "thread_rank") {
          d.thread = d.lane = true;
          d.td.insert('x');
        } else if (m == "group_index") {
          d.thread = true;
          d.bd.insert('x');
        }
      }
      if (name == "__lane_id" || name == "laneid" || name == "lane_id") {
        d.thread = d.lane = true;
        d.td.insert('x');
        d.lane_index = true;
      } else if (is_shuffle(name) || is_ldg(name) || is_atomic(name) || name.rfind("__ballot", 0) == 0 ||
                 name.rfind("__reduce", 0) == 0) {
        d.data = true;
      }
      break;
    }
    case ex_kind::subscript: {
      d.data = true;
      break;
    }
    case ex_kind::unary: {
      if (k.op == "*") {
        d.data = true;
      } else if (!k.kids.empty()) {
        deps a = deps_of(x, k.kids[0]);
        bool li = a.lane_index && (k.op == "+");
        d.merge(a);
        d.lane_index = li;
      }
      break;
    }
    case ex_kind::cast: {
      d = deps_of(x, k.kids[0]);
      break;
    }
    case ex_kind::binary: {
      deps a = deps_of(x, k.kids[0]);
      deps b = deps_of(x, k.kids[1]);
      auto c = const_eval(x, k.kids[1]);
      if (k.op == "=") {
        d = b;
        break;
      }
      d.merge(a);
      d.merge(b);
      if ((k.op == "/" || k.op == ">>") && c) {
        if ((k.op == "/" && *c != 0 && *c % 32 == 0) || (k.op == ">>" && *c >= 5)) d.lane = false;
      }
      if ((k.op == "%" || k.op == "&") && c && a.lane) {
        if ((k.op == "%" && *c == 32) || (k.op == "&" && *c == 31)) d.lane_index = true;
      }
      break;
    }
    default:
      for (int kid : k.kids) d.merge(deps_of(x, kid));
      break;
  }
  deps_memo_[key] = d;
  return d;
}

poly function_analyzer::opaque(const expr_tree& x, int n) {
  std::string name = "(" + node_text(t_, x, n) + ")";
  if (!atom_deps_.count(name)) atom_deps_[name] = deps_of(x, n);
  return poly::atom(name);
}

poly function_analyzer::var_poly(int v, int depth) {
  var_rec& r = vars_[static_cast<size_t>(v)];
  if (!expandable(r) || depth > 8 || r.poly_state == 1) {
    if (!atom_deps_.count(r.key)) atom_deps_[r.key] = var_deps(v);
    return poly::atom(r.key);
  }
  if (r.poly_state == 2) return r.value;
  r.poly_state = 1;
  poly p = poly_of(*r.init_tree, r.init_node, depth + 1);
  if (!p.ok) {
    // Not a polynomial (a float, a call): the variable itself is the atom.
    atom_deps_[r.key] = var_deps(v);
    p = poly::atom(r.key);
  }
  r.value = p;
  r.poly_state = 2;
  return p;
}

poly function_analyzer::poly_of(const expr_tree& x, int n, int depth) {
  if (n < 0) return poly::bad();
  auto key = std::make_pair(&x, n);
  if (depth == 0) {
    auto m = poly_memo_.find(key);
    if (m != poly_memo_.end()) return m->second;
  }
  const ex_node& k = x.at(n);
  poly p;
  switch (k.kind) {
    case ex_kind::number:
      p = k.is_int ? poly::cst(k.ival) : opaque(x, n);
      break;
    case ex_kind::ident: {
      if (k.op == "warpSize") {
        p = poly::cst(32);
        break;
      }
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        p = var_poly(b->second, depth);
        break;
      }
      auto c = constants_.find(last_name(k.op));
      if (c != constants_.end()) {
        p = poly::cst(c->second);
        break;
      }
      if (!atom_deps_.count(k.op)) atom_deps_[k.op] = deps_of(x, n);
      p = poly::atom(k.op);
      break;
    }
    case ex_kind::member: {
      const ex_node& o = x.at(k.kids[0]);
      if (o.kind == ex_kind::ident && binding_.find(o.toks.b) == binding_.end() &&
          (o.op == "threadIdx" || o.op == "blockIdx" || o.op == "gridDim" || o.op == "blockDim")) {
        std::string name = o.op + "." + k.op;
        if (!atom_deps_.count(name)) atom_deps_[name] = builtin_deps(o.op, k.op);
        p = poly::atom(name);
      } else {
        p = opaque(x, n);
      }
      break;
    }
    case ex_kind::cast:
      p = poly_of(x, k.kids[0], depth);
      if (!p.ok) p = opaque(x, n);
      break;
    case ex_kind::unary:
      if (k.op == "-" && !k.kids.empty())
        p = scale(poly_of(x, k.kids[0], depth), -1);
      else if (k.op == "+" && !k.kids.empty())
        p = poly_of(x, k.kids[0], depth);
      else
        p = opaque(x, n);
      if (!p.ok) p = opaque(x, n);
      break;
    case ex_kind::binary: {
      const std::string& op = k.op;
      if (op == "+" || op == "-" || op == "*") {
        poly a = poly_of(x, k.kids[0], depth);
        poly b = poly_of(x, k.kids[1], depth);
        p = op == "*" ? mul(a, b) : add(a, b, op == "+" ? 1 : -1);
      } else if (op == "<<") {
        auto c = const_eval(x, k.kids[1]);
        if (c && *c >= 0 && *c < 40)
          p = scale(poly_of(x, k.kids[0], depth), 1LL << *c);
        else
          p = poly::bad();
      } else if (op == "/") {
        auto c = const_eval(x, k.kids[1]);
        poly a = poly_of(x, k.kids[0], depth);
        p = poly::bad();
        if (c && *c != 0 && a.ok) {
          bool divisible = true;
          for (auto& [m, v] : a.t)
            if (v % *c != 0) divisible = false;
          if (divisible) {
            p = poly();
            for (auto& [m, v] : a.t) p.t[m] = v / *c;
          }
        }
      } else {
        p = poly::bad();
      }
      if (!p.ok) p = opaque(x, n);
      break;
    }
    default:
      p = opaque(x, n);
      break;
  }
  if (depth == 0) poly_memo_[key] = p;
  return p;
}

std::set<std::string> function_analyzer::var_sources(int v, int depth) {
  var_rec& r = vars_[static_cast<size_t>(v)];
  if (r.src_state == 2) return r.sources;
  if (r.src_state == 1 || depth > 12) return {};
  r.src_state = 1;
  std::set<std::string> s;
  if (r.has_init && r.init_tree) {
    auto a = sources_of(*r.init_tree, r.init_node, depth + 1);
    s.insert(a.begin(), a.end());
  }
  for (auto& [x, n] : r.values)
    if (n >= 0) {
      auto a = sources_of(*x, n, depth + 1);
      s.insert(a.begin(), a.end());
    }
  r.sources = s;
  r.src_state = 2;
  return s;
}

std::set<std::string> function_analyzer::sources_of(const expr_tree& x, int n, int depth) {
  std::set<std::string> s;
  if (n < 0 || depth > 24) return s;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::subscript: {
      ptr_ref r;
      poly idx;
      if (resolve_subscript(x, n, r, idx)) s.insert(r.base);
      // Index expressions are addresses, not values.
      return s;
    }
    case ex_kind::unary:
      if (k.op == "*") {
        ptr_ref r = resolve_ptr(x, k.kids[0]);
        if (r.ok) s.insert(r.base);
        return s;
      }
      if (k.op == "&") return s;
      break;
    case ex_kind::ident: {
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        const var_rec& v = vars_[static_cast<size_t>(b->second)];
        if (v.ptr == 0) {
          auto a = var_sources(b->second, depth + 1);
          s.insert(a.begin(), a.end());
          if (v.is_array && a.empty()) s.insert(v.key);
        }
      }
      return s;
    }
    case ex_kind::call: {
      std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
      if (is_ldg(name) && k.kids.size() >= 2) {
        ptr_ref r = resolve_ptr(x, k.kids[1]);
        if (r.ok) s.insert(r.base);
        return s;
      }
      for (size_t i = 1; i < k.kids.size(); ++i) {
        auto a = sources_of(x, k.kids[i], depth + 1);
        s.insert(a.begin(), a.end());
      }
      return s;
    }
    default:
      break;
  }
  for (int kid : k.kids) {
    auto a = sources_of(x, kid, depth + 1);
    s.insert(a.begin(), a.end());
  }
  return s;
}

}  // namespace ks::features::analysis
