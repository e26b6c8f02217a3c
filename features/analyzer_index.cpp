// Index patterns of the per-function analysis (features/function_analyzer.hpp): which
// atoms of an index derive from the thread or the block, neighbouring reads (stencil
// taps), and the rules that read the accesses' indices: global writes, data-dependent
// indexing (irregular), vector accesses (uses_vector_loads/stores, vector_width),
// stencils (stencil_or_conv), pointwise kernels (is_pointwise) and local arrays indexed
// at run time (spills, from the source).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ks::features::analysis {

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

// global_write: a store (not an atomic) to global memory.
bool function_analyzer::writes_global_memory() const {
  bool found = false;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.write && !a.atomic) found = true;
  return found;
}

// irregular: a global or shared access whose index depends on loaded data.
bool function_analyzer::has_data_dependent_index() const {
  bool found = false;
  for (auto& a : accesses_) {
    if (a.space != space_t::global && a.space != space_t::shared) continue;
    if (!a.index.ok) continue;
    for (auto& at : a.index.atoms()) {
      auto it = atom_deps_.find(at);
      if (it != atom_deps_.end() && it->second.data) found = true;
    }
  }
  return found;
}

// vector_access: a global access through a type wider than the element.
bool function_analyzer::has_vector_access() const {
  bool found = false;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.width > 1) found = true;
  return found;
}

// vector_width: the widest global access, in elements of the pointee (1 when none is
// wider).
int function_analyzer::widest_vector_access() const {
  int width = 1;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.width > 1) width = std::max(width, a.width);
  return width;
}

// vector_load: a wide global read of at least 64 bits (WMMA fragment loads aside).
bool function_analyzer::has_vector_load() const {
  bool found = false;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.width > 1 && a.bytes >= 8 && a.read && !a.wmma) found = true;
  return found;
}

// vector_store: a wide global write of at least 64 bits (WMMA fragment stores aside).
bool function_analyzer::has_vector_store() const {
  bool found = false;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.width > 1 && a.bytes >= 8 && a.write && !a.wmma) found = true;
  return found;
}

// A read that can be a stencil tap: of global or shared memory, not atomic, not
// feeding a store to the same array, with a known index.
bool function_analyzer::is_stencil_read(const access_rec& a) const {
  return a.read && !a.atomic && a.target != a.base && a.index.ok &&
         (a.space == space_t::global || a.space == space_t::shared);
}

// A read whose index slides with a loop variable as it does with a thread coordinate
// (a convolution window).
bool function_analyzer::has_sliding_window_read() const {
  bool found = false;
  for (auto& a : accesses_) {
    if (!is_stencil_read(a)) continue;
    for (int l : a.loops)
      if (window_var(a, l)) found = true;
  }
  return found;
}

// Constant-offset taps: an anchor read with at least two neighbours (3+ taps; two
// adjacent reads such as CSR's ptr[i] and ptr[i + 1] are not a stencil).
// Taps chain: the neighbours of neighbours belong to the same stencil.
bool function_analyzer::has_constant_offset_taps() {
  disjoint_sets taps_sets(accesses_.size());
  for (size_t i = 0; i < accesses_.size(); ++i) {
    if (!is_stencil_read(accesses_[i])) continue;
    for (size_t j : neighbours_of(i))
      if (is_stencil_read(accesses_[j])) taps_sets.unite(i, j);
  }
  std::map<size_t, std::set<std::string>> tap_raws;  // component → distinct indices
  for (size_t i = 0; i < accesses_.size(); ++i)
    if (is_stencil_read(accesses_[i])) tap_raws[taps_sets.find(i)].insert(accesses_[i].index.str());
  bool found = false;
  for (auto& [root, raws] : tap_raws)
    if (raws.size() >= 3) found = true;
  return found;
}

// stencil: a sliding window or three or more constant-offset taps.
bool function_analyzer::is_stencil() {
  const bool window = has_sliding_window_read();
  const bool taps = has_constant_offset_taps();
  return window || taps;
}

// Every global write is indexed per thread. Asked of every write (deps_of is memoised
// in the order of the questions).
bool function_analyzer::every_write_is_per_thread(const std::vector<const access_rec*>& writes) {
  bool all = true;
  for (auto* w : writes)
    if (!deps_of(*w->x, w->node).thread && thread_atoms(w->index).empty()) all = false;
  return all;
}

// Every global read is at the index of a write of the same width, or a broadcast (its
// thread atoms a strict subset of a write's, outside any loop).
bool function_analyzer::every_read_matches_a_write(const std::vector<const access_rec*>& reads,
                                                   const std::vector<const access_rec*>& writes) const {
  for (auto* r : reads) {
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
      bool strict_subset = rt.size() < wt.size() && std::includes(wt.begin(), wt.end(), rt.begin(), rt.end());
      if (strict_subset && loop_free) matched = true;
    }
    if (!matched) return false;
  }
  return true;
}

// is_pointwise: no reduction, shared memory, k-loop, stencil or irregular index; plain
// (non-atomic, known-index) global accesses; a kernel that writes, each write per
// thread, each read at a write's index or a broadcast.
bool function_analyzer::is_pointwise(const unit_facts& uf) {
  bool ok = !uf.cross_thread_reduction && !uf.shared_used && !uf.k_loop && !uf.stencil && !uf.irregular &&
            !uf.serial_reduction;
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
  if (!every_write_is_per_thread(writes)) ok = false;
  return ok && every_read_matches_a_write(reads, writes);
}

// A loop the compiler unrolls fully (its trip count is a small constant, or a
// #pragma unroll asks for it): its variable indexes a local array at compile time.
bool function_analyzer::is_fully_unrolled(const loop_rec& L) const {
  return L.pragma != "unroll 1" && L.trip >= 0 && !L.trip_from_launch && (!L.pragma.empty() || L.trip <= 32);
}

// A local array some access indexes with a value known only at run time (a thread
// coordinate, loaded data, the variable of a loop that is not fully unrolled): it lives
// in local memory rather than registers.
bool function_analyzer::is_indexed_at_run_time(const var_rec& v) const {
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
      for (int l : d.loops)
        if (!is_fully_unrolled(loops_[static_cast<size_t>(l)])) dynamic = true;
      if (d.loops.empty() && !d.thread && !d.data) {
        // A loop variable of an unrolled loop appears as itself: check its loop.
        for (auto& L : loops_)
          if (L.var >= 0 && var_atom(L.var) == at && !is_fully_unrolled(L)) dynamic = true;
      }
    }
  }
  return dynamic;
}

// local_array_bytes: the bytes of the local arrays indexed at run time (those of
// unknown size do not count).
long long function_analyzer::local_array_bytes() const {
  long long bytes = 0;
  for (auto& v : vars_) {
    if (!v.is_array || v.space != space_t::local) continue;
    if (!is_indexed_at_run_time(v)) continue;
    long long n = 1;
    bool known = true;
    for (long long d : v.dims) {
      if (d <= 0)
        known = false;
      else
        n *= d;
    }
    if (known && v.elem.bytes > 0) bytes += n * v.elem.bytes;
  }
  return bytes;
}

}  // namespace ks::features::analysis
