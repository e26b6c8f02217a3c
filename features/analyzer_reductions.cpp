// Reductions of the per-function analysis (features/function_analyzer.hpp): what
// accumulates (acc += a * b, acc = fmaf(a, b, acc), m = fmaxf(m, v)), and the reduction
// rules: across threads (cross_thread_reduction: reducing shuffles and intrinsics,
// accumulating atomics, shared-memory trees) and within a thread (serial_reduction).
#include "features/function_analyzer.hpp"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

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
    if ((name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fmaf_rz" || name == "__fma_rn" ||
         name == "__hfma" || name == "__hfma2" || name == "__fmul_rn" || name == "__hmul" || name == "__hmul2") &&
        k.kids.size() >= 3) {
      f1 = k.kids[1];
      f2 = k.kids[2];
      return 1;
    }
  }
  if (k.kind == ex_kind::binary && (k.op == "+" || k.op == "-"))
    return find_product(x, k.kids[0], f1, f2) || find_product(x, k.kids[1], f1, f2);
  if (k.kind == ex_kind::cast || (k.kind == ex_kind::unary && k.op == "-")) return find_product(x, k.kids[0], f1, f2);
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
    if ((name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fmaf_rz" || name == "__fma_rn" ||
         name == "__hfma" || name == "__hfma2") &&
        k.kids.size() >= 4 && mentions_lhs(k.kids[3])) {
      r.yes = true;
      r.f1 = k.kids[1];
      r.f2 = k.kids[2];
      return r;
    }
    if (name == "fmaxf" || name == "fminf" || name == "max" || name == "min" || name == "fmax" || name == "fmin" ||
        name == "__hmax" || name == "__hmin" || name == "__hadd" || name == "__hadd2" || name == "__fadd_rn") {
      r.yes = true;
      return r;
    }
  }
  return r;
}

// cross_thread_reduction through calls: __shfl_xor/down/up, __reduce_*, cg::reduce, or an
// accumulating atomic.
bool function_analyzer::reduces_through_intrinsics() const {
  bool found = false;
  for (auto& cl : calls_)
    if (is_reducing_shuffle(cl.name) || cl.name.rfind("__reduce_", 0) == 0 || cl.name == "reduce" ||
        is_accumulating_atomic(cl.name))
      found = true;
  return found;
}

// cross_thread_reduction through a shared-memory tree: a store to shared S that
// combines a value of S read at another index (s[tid] += s[tid + k]; temp[bi] +=
// temp[ai]), directly or through a local (float t = temp[ai]; ...; temp[bi] += t). A
// plain copy between elements is not. Every store is asked (sources_of is memoised in
// the order of the questions).
bool function_analyzer::has_shared_tree_reduction() {
  bool found = false;
  for (auto& as : assigns_) {
    if (as.access < 0) continue;
    const access_rec& w = accesses_[static_cast<size_t>(as.access)];
    if (w.space != space_t::shared) continue;
    int r = as.rhs;
    while (r >= 0 && as.x->at(r).kind == ex_kind::cast) r = as.x->at(r).kids[0];
    bool combines = as.op != "=" || (r >= 0 && as.x->at(r).kind != ex_kind::subscript);
    if (!combines) continue;
    bool other = false, direct = false;
    for (auto& a : accesses_) {
      if (a.x != as.x || &a == &w || !a.read || a.base != w.base) continue;
      direct = true;
      if (!(a.index == w.index)) other = true;
    }
    if (!other && !direct) {
      auto srcs = sources_of(*as.x, as.rhs);
      if (srcs.count(w.base)) other = true;
    }
    if (other) found = true;
  }
  return found;
}

// serial_reduction: an accumulation into a local, from data read with the loop
// variable (kreads: the loop's reads by base), over a loop of run-time length (a 2x2
// pooling window is not a reduction structure).
bool function_analyzer::accumulates_serially(const assign_rec& as, const loop_rec& L, const reads_by_base& kreads) {
  bool local_lhs = as.var >= 0 && vars_[static_cast<size_t>(as.var)].space != space_t::shared;
  if (!local_lhs || !(L.trip < 0 || L.trip_from_launch || L.trip > 32)) return false;
  bool found = false;
  auto s = sources_of(*as.x, as.rhs);
  for (auto& b : s)
    if (kreads.count(b)) found = true;
  return found;
}

}  // namespace ks::features::analysis
