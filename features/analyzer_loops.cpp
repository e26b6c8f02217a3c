// Loop analysis of the per-function analysis (features/function_analyzer.hpp): the shape
// of every loop (its step, whether it halves or doubles, whether its variable derives
// from the thread index, its trip count), and the loop rules: grid-stride loops
// (grid_stride_loop) and unrolled loops (unrolled_loops).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace ks::features::analysis {

long long function_analyzer::trip_of(int loop) const { return loops_[static_cast<size_t>(loop)].trip; }

void function_analyzer::derive_loops() {
  for (auto& L : loops_) {
    if (L.var < 0) continue;
    derive_step_shape(L);
  }
  // Thread-ness needs the tree flags (var_deps reads them): compute after the above.
  for (auto& L : loops_) {
    if (L.var < 0) continue;
    derive_thread_and_trip(L);
  }
}

// The step: a constant increment (i++, i += 4, i = i - 2), or a halving/doubling step
// (s >>= 1, s /= 2, s = s * 2) that makes the loop a tree.
void function_analyzer::derive_step_shape(loop_rec& L) {
  if (!L.step) return;
  const ex_node& s = L.step->at(L.step->root);
  auto is_var = [&](int n) {
    if (n < 0) return false;
    const ex_node& q = L.step->at(n);
    if (q.kind != ex_kind::ident) return false;
    auto b = binding_.find(q.toks.b);
    return b != binding_.end() && b->second == L.var;
  };
  if ((s.kind == ex_kind::postfix || s.kind == ex_kind::unary) && !s.kids.empty() && is_var(s.kids[0])) {
    L.step_const = s.op == "++" ? 1 : s.op == "--" ? -1 : 0;
  } else if (s.kind == ex_kind::binary && is_var(s.kids[0])) {
    auto c = const_eval(*L.step, s.kids[1]);
    if (s.op == "+=" || s.op == "-=") {
      if (c) L.step_const = s.op == "+=" ? *c : -*c;
    } else if ((s.op == ">>=" && c && *c >= 1) || (s.op == "/=" && c && *c >= 2) || (s.op == "<<=" && c && *c >= 1) ||
               (s.op == "*=" && c && *c >= 2)) {
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

// The bound a loop condition compares its variable with: a constant, or a kernel
// parameter whose value the resolved launch gives (then trip_from_launch).
std::optional<long long> function_analyzer::loop_bound(loop_rec& L, int bound_node) {
  auto bound = const_eval(*L.cond, bound_node);
  // A bound that is a kernel parameter: its value in the resolved launch.
  const ex_node& rb = L.cond->at(bound_node);
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
  return bound;
}

// Whether the variable derives from the thread index, whether its step is the grid's
// size (a grid-stride loop), and the trip count: init constant, condition
// var < / <= / > / >= / != bound, constant step.
void function_analyzer::derive_thread_and_trip(loop_rec& L) {
  deps d = var_deps(L.var);
  L.thread_var = d.thread;
  if (L.step && L.thread_var) {
    deps s = deps_of(*L.step, L.step->root);
    if (s.grid) L.grid_stride = true;
  }
  const var_rec& v = vars_[static_cast<size_t>(L.var)];
  std::optional<long long> init;
  if (v.loop_id == L.id && v.has_init && v.init_tree) init = const_eval(*v.init_tree, v.init_node);
  if (!init && L.init) {
    const ex_node& r = L.init->at(L.init->root);
    if (r.kind == ex_kind::binary && r.op == "=") init = const_eval(*L.init, r.kids[1]);
  }
  if (!init || !L.cond || L.step_const == 0) return;
  const ex_node& c = L.cond->at(L.cond->root);
  if (c.kind != ex_kind::binary || c.kids.size() != 2) return;
  const ex_node& l = L.cond->at(c.kids[0]);
  auto b = binding_.find(l.toks.b);
  if (!(l.kind == ex_kind::ident && b != binding_.end() && b->second == L.var)) return;
  auto bound = loop_bound(L, c.kids[1]);
  if (!bound) return;
  long long a = *init, B = *bound, st = L.step_const;
  long long trip = -1;
  if (c.op == "<" && st > 0)
    trip = B > a ? (B - a + st - 1) / st : 0;
  else if (c.op == "<=" && st > 0)
    trip = B >= a ? (B - a) / st + 1 : 0;
  else if (c.op == ">" && st < 0)
    trip = a > B ? (a - B + (-st) - 1) / (-st) : 0;
  else if (c.op == ">=" && st < 0)
    trip = a >= B ? (a - B) / (-st) + 1 : 0;
  else if (c.op == "!=" && st != 0 && (B - a) % st == 0 && (B - a) / st >= 0)
    trip = (B - a) / st;
  L.trip = trip;
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

// grid_stride_loop: a for loop whose thread-derived variable steps by the grid's size.
bool function_analyzer::has_grid_stride_for_loop() const {
  bool found = false;
  for (auto& L : loops_)
    if (L.grid_stride) found = true;
  return found;
}

// grid_stride_loop, while loops: i += stride inside the loop, i thread-derived, stride
// from the grid's size.
bool function_analyzer::has_grid_stride_while_loop() {
  bool found = false;
  for (auto& as : assigns_) {
    if (as.op != "+=" || as.var < 0 || as.loops.empty()) continue;
    const loop_rec& L = loops_[static_cast<size_t>(as.loops.back())];
    if (L.kind != st_kind::while_loop && L.kind != st_kind::do_loop) continue;
    if (var_deps(as.var).thread && deps_of(*as.x, as.rhs).grid) found = true;
  }
  return found;
}

// Accesses of one base at var + 0, 1, ..., U-1 (U >= 2) in the body, and a step of at
// least U (or a run-time stride): the body was unrolled by hand.
bool function_analyzer::is_unrolled_by_hand(const loop_rec& L) const {
  if (L.var < 0 || L.step_const == 1 || L.step_const == -1 || L.tree) return false;
  bool manual = false;
  std::string va = var_atom(L.var);
  // Stores at consecutive offsets qualify with any step; loads (a stencil reads
  // neighbours too) only with a constant step covering them.
  std::map<std::string, std::set<long long>> offsets;  // w/r + base + rest → offsets
  for (auto& a : accesses_) {
    if (!in_loop(a.loops, L.id) || !a.index.ok || !a.index.has(va)) continue;
    poly rest = a.index;
    rest.t.erase(monomial{});
    offsets[(a.write ? "w|" : "r|") + a.base + "|" + rest.str()].insert(a.index.cval());
  }
  for (auto& [k, offs] : offsets) {
    bool store = k[0] == 'w';
    long long run = 1, best = 1;
    long long prev = 0;
    bool first = true;
    for (long long o : offs) {
      run = (!first && o == prev + 1) ? run + 1 : 1;
      best = std::max(best, run);
      prev = o;
      first = false;
    }
    if (best >= 2 && ((store && (L.step_const == 0 || L.step_const >= best)) || (!store && L.step_const >= best)))
      manual = true;
  }
  return manual;
}

// unrolled_loops: loops with a #pragma unroll (other than "unroll 1") or unrolled by
// hand.
int function_analyzer::count_unrolled_loops() const {
  int unrolled = 0;
  for (auto& L : loops_) {
    bool pragma = !L.pragma.empty() && L.pragma != "unroll 1";
    bool manual = !pragma && is_unrolled_by_hand(L);
    if (pragma || manual) ++unrolled;
  }
  return unrolled;
}

}  // namespace ks::features::analysis
