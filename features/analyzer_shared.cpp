// Shared memory in the per-function analysis (features/function_analyzer.hpp): whether a
// function uses it (uses_shared_memory), which shared arrays are staged from which
// global reads, and the tiling rule (shared_mem_tiles).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ks::features::analysis {

// shared_used: a shared array is declared or accessed.
bool function_analyzer::uses_shared_memory() const {
  bool used = false;
  for (auto& a : accesses_)
    if (a.space == space_t::shared) used = true;
  for (auto& v : vars_)
    if (v.space == space_t::shared) used = true;
  return used;
}

// Staging: shared arrays stored from global reads, directly (As[..] = A[..]) or through
// a local (float v = A[...]; As[...] = v;), and the global reads of WMMA fragments.
staging function_analyzer::find_staging() {
  staging st;
  auto& staged_from = st.staged_from;
  auto& staging_reads = st.staging_reads;
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
  return st;
}

// A read r of staged shared array s inside a loop (not a tree or thread loop) that
// accumulates into something other than s.
bool function_analyzer::is_tile_read_in_accumulating_loop(const access_rec& r, const std::string& s) {
  bool found = false;
  for (int l : r.loops) {
    const loop_rec& L = loops_[static_cast<size_t>(l)];
    if (L.tree || L.thread_var) continue;
    for (auto& as : assigns_) {
      if (!in_loop(as.loops, l)) continue;
      if (as.access >= 0 && accesses_[static_cast<size_t>(as.access)].base == s) continue;
      if (accumulation_of(as).yes) found = true;
    }
  }
  return found;
}

// Neighbour reuse without a loop: one read of s with two or more neighbours (3+ taps).
bool function_analyzer::has_neighbour_reuse(const std::vector<const access_rec*>& reads, const std::string& s) {
  bool found = false;
  for (auto* r : reads) {
    std::set<std::string> raws{r->index.str()};
    for (size_t j : neighbours_of(index_of(r))) {
      const access_rec& o = accesses_[j];
      if (o.read && o.target != s) raws.insert(o.index.str());
    }
    if (raws.size() >= 3) found = true;
  }
  return found;
}

// shared_tiles: a shared array staged from global memory and read back in a loop that
// accumulates, or read with its neighbours (a stencil tile).
bool function_analyzer::has_shared_memory_tiling(const staging& st) {
  bool tiled = false;
  for (auto& [s, from] : st.staged_from) {
    if (from.empty()) continue;
    bool tile = false;
    std::vector<const access_rec*> reads;
    for (auto& a : accesses_)
      if (a.base == s && a.read && a.target != s) reads.push_back(&a);
    for (auto* r : reads)
      if (is_tile_read_in_accumulating_loop(*r, s)) tile = true;
    if (!tile) tile = has_neighbour_reuse(reads, s);
    if (tile) tiled = true;
  }
  return tiled;
}

}  // namespace ks::features::analysis
