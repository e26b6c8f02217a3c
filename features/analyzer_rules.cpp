// The classification rules of the per-function analysis (features/function_analyzer.hpp).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

unit_facts function_analyzer::run() {
  unit_facts uf;
  uf.name = f_.name;
  uf.is_kernel = f_.is_kernel;
  // Parameters.
  scopes_.emplace_back();
  for (auto& p : f_.params) {
    if (p.name.empty()) continue;
    var_rec v;
    v.name = p.name;
    v.key = p.name;
    v.type = p.base_type;
    v.ptr = p.pointer_depth;
    v.elem = shape_of_type(p.base_type);
    v.is_param = true;
    v.space = v.ptr > 0 ? (f_.is_kernel ? space_t::global : space_t::unknown) : space_t::none;
    int id = static_cast<int>(vars_.size());
    vars_.push_back(v);
    scopes_.back()[p.name] = id;
  }
  // Pass 1.
  std::vector<int> loops;
  std::vector<guard> guards;
  walk(f_.tree, loops, guards);
  scopes_.clear();
  derive_loops();
  // Pass 2.
  for (size_t i = 0; i < items_.size(); ++i) {
    item_rec& it = items_[i];
    vctx c{static_cast<int>(i), ""};
    if (it.role == role_t::decl_init && it.var >= 0) c.target = vars_[static_cast<size_t>(it.var)].key;
    visit(*it.x, it.x->root, use::read, c);
    if (it.role == role_t::cond_if || it.role == role_t::cond_while ||
        it.role == role_t::cond_for || it.role == role_t::cond_switch) {
      cond_rec cr;
      cr.x = it.x;
      cr.node = it.x->root;
      cr.kind = it.role;
      cr.loops = it.loops;
      conds_.push_back(cr);
    }
  }
  // Declarations of pointer variables initialised from a global pointer are values,
  // not accesses; nothing to do. Decl inits that are reads were visited above.

  auto in_loop = [](const std::vector<int>& ls, int id) {
    return std::find(ls.begin(), ls.end(), id) != ls.end();
  };

  index_neighbours();
  auto index_of = [&](const access_rec* a) { return static_cast<size_t>(a - accesses_.data()); };

  // ---- simple facts
  for (auto& a : accesses_) {
    if (a.space == space_t::global && a.write && !a.atomic) uf.global_write = true;
    if (a.space == space_t::shared) uf.shared_used = true;
  }
  for (auto& v : vars_)
    if (v.space == space_t::shared) uf.shared_used = true;

  // Calls: shuffles, atomics, reduce intrinsics, mma.
  std::set<int> mma_loops;
  for (auto& cl : calls_) {
    if (is_reducing_shuffle(cl.name) || cl.name.rfind("__reduce_", 0) == 0 ||
        cl.name == "reduce" || is_accumulating_atomic(cl.name))
      uf.cross_thread_reduction = true;
    if (cl.name == "mma_sync")
      for (int l : cl.loops) mma_loops.insert(l);
  }

  // Shared-memory tree: a store to shared S that combines a value of S read at another
  // index (s[tid] += s[tid + k]; temp[bi] += temp[ai]), directly or through a local
  // (float t = temp[ai]; ...; temp[bi] += t). A plain copy between elements is not.
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
    if (other) uf.cross_thread_reduction = true;
  }

  // ---- irregular: data-dependent indices
  for (auto& a : accesses_) {
    if (a.space != space_t::global && a.space != space_t::shared) continue;
    if (!a.index.ok) continue;
    for (auto& at : a.index.atoms()) {
      auto it = atom_deps_.find(at);
      if (it != atom_deps_.end() && it->second.data) uf.irregular = true;
    }
  }

  // ---- loops: grid stride, unrolling
  for (auto& L : loops_) {
    if (L.grid_stride) uf.grid_stride = true;
    bool pragma = !L.pragma.empty() && L.pragma != "unroll 1";
    bool manual = false;
    if (!pragma && L.var >= 0 && L.step_const != 1 && L.step_const != -1 && !L.tree) {
      // Accesses of one base at var + 0, 1, ..., U-1 (U >= 2) in the body, and a step
      // of at least U (or a run-time stride): the body was unrolled by hand.
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
        if (best >= 2 && ((store && (L.step_const == 0 || L.step_const >= best)) ||
                          (!store && L.step_const >= best)))
          manual = true;
      }
    }
    if (pragma || manual) ++uf.unrolled;
  }
  // while-loop grid strides: i += stride inside the loop, i thread-derived, stride grid.
  for (auto& as : assigns_) {
    if (as.op != "+=" || as.var < 0 || as.loops.empty()) continue;
    const loop_rec& L = loops_[static_cast<size_t>(as.loops.back())];
    if (L.kind != st_kind::while_loop && L.kind != st_kind::do_loop) continue;
    if (var_deps(as.var).thread && deps_of(*as.x, as.rhs).grid) uf.grid_stride = true;
  }

  // ---- conditions
  for (auto& c : conds_) {
    if (cond_has_bounds(*c.x, c.node)) uf.bounds_check = true;
    // Loop conditions and conditional expressions (which compile to selects) are not
    // counted as divergent branches.
    if (c.kind != role_t::cond_for && c.kind != role_t::cond_ternary &&
        cond_divergent(*c.x, c.node))
      ++uf.divergent;
  }

  // ---- vector accesses
  std::map<std::string, int> widest;  // base → widest width
  for (auto& a : accesses_) {
    if (a.space != space_t::global) continue;
    if (a.width > 1) {
      uf.vector_access = true;
      uf.vector_width = std::max(uf.vector_width, a.width);
      if (a.bytes >= 8) {
        if (a.read && !a.wmma) uf.vector_load = true;
        if (a.write && !a.wmma) uf.vector_store = true;
      }
    }
    widest[a.base] = std::max(widest[a.base], a.width);
  }

  // ---- accumulations, k-loops, serial reductions
  struct kl {
    int loop;
    std::string p, q;  // operand bases
  };
  std::vector<kl> kloops;
  for (auto& L : loops_) {
    if (L.var < 0 || L.grid_stride || L.tree) continue;
    std::string va = var_atom(L.var);
    // Reads in the loop indexed by its variable.
    std::map<std::string, std::vector<const access_rec*>> kreads;
    bool window = false;
    for (auto& a : accesses_) {
      if (!a.read || !in_loop(a.loops, L.id) || !a.index.ok || !a.index.has(va)) continue;
      if (a.space != space_t::global && a.space != space_t::shared && a.space != space_t::unknown)
        continue;
      if (window_var(a, L.id)) window = true;
      kreads[a.base].push_back(&a);
    }
    bool product = false;
    for (auto& as : assigns_) {
      if (!in_loop(as.loops, L.id)) continue;
      accumulation acc = accumulation_of(as);
      if (!acc.yes) continue;
      // Serial reduction: into a local, from data read with the loop variable, over a
      // loop of run-time length (a 2x2 pooling window is not a reduction structure).
      bool local_lhs = as.var >= 0 && vars_[static_cast<size_t>(as.var)].space != space_t::shared;
      if (local_lhs && (L.trip < 0 || L.trip_from_launch || L.trip > 32)) {
        auto s = sources_of(*as.x, as.rhs);
        for (auto& b : s)
          if (kreads.count(b)) uf.serial_reduction = true;
      }
      if (acc.f1 < 0) continue;
      auto s1 = sources_of(*as.x, acc.f1);
      auto s2 = sources_of(*as.x, acc.f2);
      std::set<std::string> u = s1;
      u.insert(s2.begin(), s2.end());
      if (!s1.empty() && !s2.empty() && u.size() >= 2) product = true;
    }
    // WMMA: fragment loads (already among the reads) and mma_sync in the loop.
    bool wmma_loop = mma_loops.count(L.id) > 0;
    if (!window && kreads.size() >= 2 && (product || wmma_loop)) {
      uf.k_loop = true;
      // GEMM-like: two operands whose thread atoms are incomparable.
      std::vector<std::pair<std::string, std::set<std::string>>> ops;
      for (auto& [b, list] : kreads) {
        std::set<std::string> ta;
        for (auto* a : list) {
          auto s = thread_atoms(a->index);
          ta.insert(s.begin(), s.end());
        }
        ops.push_back({b, ta});
      }
      for (size_t i = 0; i < ops.size(); ++i)
        for (size_t j = i + 1; j < ops.size(); ++j) {
          auto& A = ops[i].second;
          auto& B = ops[j].second;
          bool a_in_b = std::includes(B.begin(), B.end(), A.begin(), A.end());
          bool b_in_a = std::includes(A.begin(), A.end(), B.begin(), B.end());
          if (!a_in_b && !b_in_a) {
            bool dup = false;
            for (auto& k : kloops)
              if (k.loop == L.id) dup = true;
            if (!dup) kloops.push_back({L.id, ops[i].first, ops[j].first});
          }
        }
    }
  }

  // Staging: shared arrays stored from global reads.
  std::map<std::string, std::set<std::string>> staged_from;  // shared base → global bases
  std::map<std::string, std::vector<const access_rec*>> staging_reads;  // global base → reads feeding shared
  for (auto& a : accesses_) {
    if (a.space != space_t::global || !a.read || a.target.empty()) continue;
    // The target is a shared array?
    for (auto& b : accesses_)
      if (b.base == a.target && b.space == space_t::shared && b.write) {
        staged_from[a.target].insert(a.base);
        staging_reads[a.base].push_back(&a);
        break;
      }
  }
  // Staging through a local: float v = A[...]; As[...] = v;
  for (auto& as : assigns_) {
    if (as.access < 0) continue;
    const access_rec& w = accesses_[static_cast<size_t>(as.access)];
    if (w.space != space_t::shared) continue;
    // Every global read of a source array counts as staging (the value's path through
    // locals is not tracked read by read).
    for (auto& b : sources_of(*as.x, as.rhs)) {
      for (auto& a : accesses_)
        if (a.base == b && a.space == space_t::global && a.read) {
          staged_from[w.base].insert(b);
          auto& list = staging_reads[b];
          if (std::find(list.begin(), list.end(), &a) == list.end()) list.push_back(&a);
        }
    }
  }
  for (auto& a : accesses_)
    if (a.wmma && a.read && a.space == space_t::global) staging_reads[a.base].push_back(&a);

  // ---- shared tiles: a staged shared array read in a loop that accumulates.
  for (auto& [s, from] : staged_from) {
    if (from.empty()) continue;
    bool tile = false;
    std::vector<const access_rec*> reads;
    for (auto& a : accesses_)
      if (a.base == s && a.read && a.target != s) reads.push_back(&a);
    for (auto* r : reads) {
      for (int l : r->loops) {
        const loop_rec& L = loops_[static_cast<size_t>(l)];
        if (L.tree || L.thread_var) continue;
        for (auto& as : assigns_) {
          if (!in_loop(as.loops, l)) continue;
          if (as.access >= 0 && accesses_[static_cast<size_t>(as.access)].base == s) continue;
          if (accumulation_of(as).yes) tile = true;
        }
      }
    }
    // Neighbour reuse without a loop: one read with two or more neighbours (3+ taps).
    if (!tile) {
      for (auto* r : reads) {
        std::set<std::string> raws{r->index.str()};
        for (size_t j : neighbours_of(index_of(r))) {
          const access_rec& o = accesses_[j];
          if (o.read && o.target != s) raws.insert(o.index.str());
        }
        if (raws.size() >= 3) tile = true;
      }
    }
    if (tile) uf.shared_tiles = true;
  }

  // ---- stencil / convolution
  auto stencil_read = [&](const access_rec& a) {
    return a.read && !a.atomic && a.target != a.base && a.index.ok &&
           (a.space == space_t::global || a.space == space_t::shared);
  };
  for (auto& a : accesses_) {
    if (!stencil_read(a)) continue;
    for (int l : a.loops)
      if (window_var(a, l)) uf.stencil = true;
  }
  // Constant-offset taps: an anchor read with at least two neighbours (3+ taps; two
  // adjacent reads such as CSR's ptr[i] and ptr[i + 1] are not a stencil).
  // Taps chain: the neighbours of neighbours belong to the same stencil.
  disjoint_sets taps_sets(accesses_.size());
  for (size_t i = 0; i < accesses_.size(); ++i) {
    if (!stencil_read(accesses_[i])) continue;
    for (size_t j : neighbours_of(i))
      if (stencil_read(accesses_[j])) taps_sets.unite(i, j);
  }
  std::map<size_t, std::set<std::string>> tap_raws;  // component → distinct indices
  for (size_t i = 0; i < accesses_.size(); ++i)
    if (stencil_read(accesses_[i])) tap_raws[taps_sets.find(i)].insert(accesses_[i].index.str());
  for (auto& [root, raws] : tap_raws)
    if (raws.size() >= 3) uf.stencil = true;

  // ---- GEMM classification
  for (auto& k : kloops) {
    uf.gemm_like = true;
    auto space_of = [&](const std::string& b) {
      for (auto& a : accesses_)
        if (a.base == b) return a.space;
      return space_t::unknown;
    };
    bool wmma = false;
    for (auto& a : accesses_)
      if (a.wmma && (a.base == k.p || a.base == k.q)) wmma = true;
    bool staged_operand = false;
    for (auto& [g, reads] : staging_reads)
      if (g == k.p || g == k.q)
        for (auto* r : reads)
          if (in_loop(r->loops, k.loop)) staged_operand = true;
    if (space_of(k.p) == space_t::global && space_of(k.q) == space_t::global && !wmma &&
        !staged_operand)
      uf.naive_gemm = true;
    auto half_base = [&](const std::string& b) {
      for (auto& a : accesses_)
        if (a.base == b && (a.base_elem.scalar == "half" || a.base_elem.scalar == "bfloat16"))
          return true;
      auto sf = staged_from.find(b);
      if (sf == staged_from.end()) return false;
      for (auto& g : sf->second)
        for (auto& a : accesses_)
          if (a.base == g && (a.base_elem.scalar == "half" || a.base_elem.scalar == "bfloat16"))
            return true;
      return false;
    };
    if (half_base(k.p) || half_base(k.q)) uf.half_operands = true;
  }
  if (uf.naive_gemm) {
    // Any k-loop staged through shared memory makes it a tiled GEMM.
    for (auto& k : kloops) {
      auto sp = [&](const std::string& b) {
        for (auto& a : accesses_)
          if (a.base == b) return a.space;
        return space_t::unknown;
      };
      if (sp(k.p) == space_t::shared || sp(k.q) == space_t::shared) uf.naive_gemm = false;
    }
  }

  // ---- tail handling and alignment checks
  if (uf.vector_access) {
    for (auto& a : accesses_)
      if (a.space == space_t::global && a.width == 1 && widest[a.base] > 1) uf.tail = true;
    bool size_check = false;
    int w = uf.vector_width;
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
    uf.align_checked = ptr_int_check_ || align_call_ || (size_check && uf.tail);
  } else if (uf.shared_tiles) {
    for (auto& [g, reads] : staging_reads)
      for (auto* a : reads) {
        const item_rec& it = items_[static_cast<size_t>(a->item)];
        for (auto& gd : it.guards)
          if (cond_has_bounds(*gd.x, gd.node)) uf.tail = true;
      }
    for (auto& c : conds_) {
      // A ternary guarding a staging load.
      if (!cond_has_bounds(*c.x, c.node)) continue;
      for (auto& [g, reads] : staging_reads)
        for (auto* a : reads)
          if (a->x == c.x) uf.tail = true;
    }
  } else {
    uf.tail = uf.bounds_check;
  }

  // ---- local arrays indexed at run time
  for (auto& v : vars_) {
    if (!v.is_array || v.space != space_t::local) continue;
    bool dynamic = false;
    for (auto& a : accesses_) {
      if (a.base != v.key || !a.index.ok) {
        if (a.base == v.key) dynamic = true;
        continue;
      }
      for (auto& at : a.index.atoms()) {
        if (at.rfind("dim:", 0) == 0) continue;
        auto it = atom_deps_.find(at);
        if (it == atom_deps_.end()) {
          dynamic = true;
          continue;
        }
        const deps& d = it->second;
        if (d.thread || d.data) dynamic = true;
        for (int l : d.loops) {
          const loop_rec& L = loops_[static_cast<size_t>(l)];
          bool unrolled = L.pragma != "unroll 1" && L.trip >= 0 && !L.trip_from_launch &&
                          (!L.pragma.empty() || L.trip <= 32);
          if (!unrolled) dynamic = true;
        }
        if (d.loops.empty() && !d.thread && !d.data) {
          // A loop variable of an unrolled loop appears as itself: check its loop.
          for (auto& L : loops_)
            if (L.var >= 0 && var_atom(L.var) == at) {
              bool unrolled = L.pragma != "unroll 1" && L.trip >= 0 && !L.trip_from_launch &&
                          (!L.pragma.empty() || L.trip <= 32);
              if (!unrolled) dynamic = true;
            }
        }
      }
    }
    if (dynamic) {
      long long n = 1;
      bool known = true;
      for (long long d : v.dims) {
        if (d <= 0) known = false;
        else n *= d;
      }
      if (known && v.elem.bytes > 0) uf.local_array_bytes += n * v.elem.bytes;
    }
  }

  // ---- pointwise
  {
    bool ok = !uf.cross_thread_reduction && !uf.shared_used && !uf.k_loop && !uf.stencil &&
              !uf.irregular && !uf.serial_reduction;
    std::vector<const access_rec*> writes, reads;
    for (auto& a : accesses_) {
      if (a.space != space_t::global) continue;
      if (a.atomic || !a.index.ok) {
        ok = false;
        continue;
      }
      if (a.write) writes.push_back(&a);
      if (a.read) reads.push_back(&a);
    }
    if (writes.empty() && f_.is_kernel) ok = false;
    for (auto* w : writes)
      if (!deps_of(*w->x, w->node).thread && thread_atoms(w->index).empty()) ok = false;
    for (auto* r : reads) {
      if (!ok) break;
      bool matched = false;
      auto rt = thread_atoms(r->index);
      bool loop_free = true;
      for (auto& at : r->index.atoms()) {
        auto it = atom_deps_.find(at);
        if (it != atom_deps_.end() && !it->second.loops.empty()) loop_free = false;
      }
      for (auto* w : writes) {
        if (r->index == w->index && r->ratio == w->ratio) matched = true;
        auto wt = thread_atoms(w->index);
        bool strict_subset = rt.size() < wt.size() &&
                             std::includes(wt.begin(), wt.end(), rt.begin(), rt.end());
        if (strict_subset && loop_free) matched = true;
      }
      if (!matched) ok = false;
    }
    uf.pointwise = ok;
  }

  // ---- reuse
  {
    // Output dimensions and per-block extents (from the writes).
    std::set<char> out_dims;
    std::vector<const access_rec*> gwrites;
    for (auto& a : accesses_)
      if (a.space == space_t::global && a.write && a.index.ok) {
        gwrites.push_back(&a);
        auto bd = block_dims(a.index);
        out_dims.insert(bd.begin(), bd.end());
      }
    std::map<std::string, long long> numeric;
    for (int d = 0; d < 3; ++d) {
      std::string dn(1, "xyz"[d]);
      long long bd = launch_ && launch_->block[d] > 0 ? launch_->block[d] : 0;
      if (bd > 0) numeric["blockDim." + dn] = bd;
    }
    // Only blockDim is substituted: with the sizes symbolic, a coefficient of another
    // dimension (N for a row) cannot divide the block's coefficient by accident.
    // Without a launch, a 2-D shared tile [Y][X] suggests the block's shape.
    for (auto& v : vars_) {
      if (v.space != space_t::shared || v.dims.size() != 2 || v.dims[0] <= 0 || v.dims[1] <= 0)
        continue;
      if (!numeric.count("blockDim.x") && v.dims[0] == v.dims[1]) {
        numeric["blockDim.x"] = v.dims[1];
        numeric["blockDim.y"] = v.dims[0];
      }
      break;
    }
    auto block_extent = [&](char d) -> long long {
      std::string b = std::string("blockIdx.") + d;
      long long best = 0;
      for (auto* w : gwrites) {
        poly idx = substitute(w->index, numeric);
        if (!idx.has(b)) continue;
        poly cb = idx.coeff(b);
        for (auto& at : idx.atoms()) {
          if (at == b) continue;
          auto it = atom_deps_.find(at);
          bool sub_block = false;
          if (it != atom_deps_.end()) {
            const deps& dd = it->second;
            sub_block = (dd.thread && dd.bd.empty()) || !dd.loops.empty();
          }
          if (!sub_block) continue;
          poly ca = idx.coeff(at);
          long long m = 0;
          if (multiple_of(cb, ca, m) && m > best) best = m;
        }
      }
      return best;
    };
    auto extent = [&](char d) -> double {
      int di = d - 'x';
      if (launch_ && launch_->grid[di] > 0) {
        long long m = block_extent(d);
        if (m <= 0) m = launch_->block[di] > 0 ? launch_->block[di] : 1;
        return static_cast<double>(launch_->grid[di]) * static_cast<double>(m);
      }
      return nominal_;
    };
    double reuse = 1;
    if (!kloops.empty()) {
      for (auto& k : kloops) {
        double sum = 0;
        int count = 0;
        for (const std::string& op : {k.p, k.q}) {
          // Global reads of this operand: direct, or the reads staged into it.
          std::vector<const access_rec*> sites;
          bool staged = false;
          bool frag = false;
          for (auto& a : accesses_)
            if (a.base == op && a.read && a.space == space_t::global) {
              sites.push_back(&a);
              if (a.wmma) frag = true;
            }
          auto sf = staged_from.find(op);
          if (sites.empty() || (!frag && sf != staged_from.end() && !sf->second.empty())) {
            if (sf != staged_from.end())
              for (auto& g : sf->second) {
                auto sr = staging_reads.find(g);
                if (sr != staging_reads.end())
                  for (auto* r : sr->second) sites.push_back(r);
              }
            staged = true;
          }
          if (frag) staged = true;
          double best = 0;
          for (auto* s : sites) {
            bool site_staged = staged || s->wmma;
            for (auto& [g, reads] : staging_reads)
              for (auto* r : reads)
                if (r == s) site_staged = true;
            auto bd = block_dims(s->index);
            double r = 1;
            bool any = false;
            for (char d : out_dims) {
              if (bd.count(d)) continue;
              any = true;
              double e = extent(d);
              if (site_staged) {
                long long m = s->wmma ? 16 : block_extent(d);
                if (m <= 0) m = 16;
                r *= std::max(1.0, e / static_cast<double>(m));
              } else {
                r *= e;
              }
            }
            if (!any) r = site_staged ? std::max(1.0, nominal_ / 16.0) : nominal_;
            // Without sizes, one nominal extent bounds an operand's reuse (a conv
            // weight misses three output dimensions; 1024^3 would say nothing more).
            if (!launch_) r = std::min(r, nominal_);
            best = std::max(best, r);
          }
          if (best > 0) {
            sum += best;
            ++count;
          }
        }
        if (count > 0) reuse = std::max(reuse, sum / count);
      }
    } else {
      // Re-reads: neighbours (stencil taps, window loops) and passes over the same data.
      std::map<std::string, std::vector<const access_rec*>> by_base;
      for (auto& a : accesses_)
        if (a.space == space_t::global && a.read && !a.atomic) by_base[a.base].push_back(&a);
      std::set<std::string> write_atoms;
      for (auto* w : gwrites) {
        auto s = thread_atoms(w->index);
        write_atoms.insert(s.begin(), s.end());
      }
      // Variables a loop (re)initialises: each such loop is a new pass over its range.
      std::set<std::string> fresh_loop_atoms;
      for (auto& L : loops_)
        if (L.var >= 0 && (vars_[static_cast<size_t>(L.var)].loop_id == L.id || L.init != nullptr))
          fresh_loop_atoms.insert(var_atom(L.var));
      auto canonical = [&](const access_rec& a) {
        // The index with the fresh loop variables renamed alike.
        poly p;
        p.ok = a.index.ok;
        for (auto& [m, c] : a.index.t) {
          monomial mm;
          for (auto& at : m) mm.push_back(fresh_loop_atoms.count(at) ? std::string("@loop") : at);
          std::sort(mm.begin(), mm.end());
          p.t[mm] += c;
        }
        return p.str() + "/" + std::to_string(a.ratio);
      };
      std::set<const access_rec*> staged_set;
      for (auto& [g, reads] : staging_reads) staged_set.insert(reads.begin(), reads.end());
      for (auto& [b, sites] : by_base) {
        // Broadcast operands (indexed by fewer thread atoms than the output) do not count.
        bool broadcast = !write_atoms.empty();
        for (auto* s : sites) {
          auto ta = thread_atoms(s->index);
          bool strict = ta.size() < write_atoms.size() &&
                        std::includes(write_atoms.begin(), write_atoms.end(), ta.begin(), ta.end());
          if (!strict) broadcast = false;
        }
        if (broadcast) continue;
        auto taps = [&](const access_rec& a) {
          double t = 1;
          for (int l : a.loops)
            if (window_var(a, l)) {
              long long tr = trip_of(l);
              t *= tr > 0 ? static_cast<double>(tr) : 3.0;
            }
          return t;
        };
        const size_t n = sites.size();
        std::map<size_t, size_t> local;  // access index → site index
        for (size_t i = 0; i < n; ++i) local[index_of(sites[i])] = i;
        std::vector<std::string> raw(n), canon(n);
        for (size_t i = 0; i < n; ++i) {
          raw[i] = sites[i]->index.str() + "/" + std::to_string(sites[i]->ratio);
          canon[i] = canonical(*sites[i]);
        }
        // Stencil taps: neighbour components of three or more distinct reads (reads
        // that stage a shared tile are loaded once each and do not count).
        disjoint_sets nb(n);
        for (size_t i = 0; i < n; ++i) {
          if (staged_set.count(sites[i])) continue;
          for (size_t j : neighbours_of(index_of(sites[i]))) {
            auto it = local.find(j);
            if (it != local.end() && !staged_set.count(sites[it->second])) nb.unite(i, it->second);
          }
        }
        std::map<size_t, std::set<std::string>> nb_raws;
        for (size_t i = 0; i < n; ++i) nb_raws[nb.find(i)].insert(raw[i]);
        // Groups: taps of one stencil, and passes over the same elements.
        disjoint_sets groups(n);
        std::map<std::string, size_t> first_canon;
        for (size_t i = 0; i < n; ++i) {
          auto [it, fresh] = first_canon.emplace(canon[i], i);
          if (!fresh) groups.unite(i, it->second);
          if (nb_raws[nb.find(i)].size() >= 3) groups.unite(i, nb.find(i));
        }
        // Reads with the same raw index are one read (the compiler keeps the value, or
        // a variable continues where the previous loop left it).
        std::map<size_t, std::map<std::string, double>> group_taps;
        for (size_t i = 0; i < n; ++i) {
          double& t = group_taps[groups.find(i)][raw[i]];
          t = std::max(t, taps(*sites[i]));
        }
        for (auto& [root, per_raw] : group_taps) {
          double total = 0;
          for (auto& [k, t] : per_raw) total += t;
          reuse = std::max(reuse, total);
        }
      }
    }
    uf.reuse = std::round(reuse * 100.0) / 100.0;
  }
  return uf;
}

}  // namespace ks::features::analysis
