// k-loops and GEMMs of the per-function analysis (features/function_analyzer.hpp): the
// scan of every loop that accumulates what it reads (has_k_loop, and the serial
// reductions found on the way), the operand pairs that make a k-loop GEMM-like
// (tensor_core_eligible), and the GEMM classification (naive_gemm, half-precision
// operands).
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ks::features::analysis {

// The loops that hold an mma_sync (WMMA).
std::set<int> function_analyzer::loops_with_mma() const {
  std::set<int> mma_loops;
  for (auto& cl : calls_)
    if (cl.name == "mma_sync")
      for (int l : cl.loops) mma_loops.insert(l);
  return mma_loops;
}

// The reads of global, shared or unknown memory in loop L indexed by its variable, by
// base; `window` when one of them slides with a thread coordinate (a convolution
// window, not a k-loop).
reads_by_base function_analyzer::reads_indexed_by(const loop_rec& L, bool& window) const {
  std::string va = var_atom(L.var);
  reads_by_base kreads;
  window = false;
  for (auto& a : accesses_) {
    if (!a.read || !in_loop(a.loops, L.id) || !a.index.ok || !a.index.has(va)) continue;
    if (a.space != space_t::global && a.space != space_t::shared && a.space != space_t::unknown) continue;
    if (window_var(a, L.id)) window = true;
    kreads[a.base].push_back(&a);
  }
  return kreads;
}

// An accumulated product whose factors come from memory, from two different arrays
// between them (acc += A[..] * B[..]).
bool function_analyzer::multiplies_two_sources(const assign_rec& as, const accumulation& acc) {
  if (acc.f1 < 0) return false;
  auto s1 = sources_of(*as.x, acc.f1);
  auto s2 = sources_of(*as.x, acc.f2);
  std::set<std::string> u = s1;
  u.insert(s2.begin(), s2.end());
  return !s1.empty() && !s2.empty() && u.size() >= 2;
}

// GEMM-like: two operands of the k-loop whose thread atoms are incomparable (each
// indexed by a thread coordinate the other lacks: rows of A, columns of B). The first
// such pair of a loop is kept.
void function_analyzer::add_gemm_operand_pairs(const loop_rec& L, const reads_by_base& kreads,
                                               std::vector<k_loop_operands>& out) const {
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
        for (auto& k : out)
          if (k.loop == L.id) dup = true;
        if (!dup) out.push_back({L.id, ops[i].first, ops[j].first});
      }
    }
}

// k_loop: a loop (not a thread, grid-stride or tree loop, not a sliding window) that
// reads two or more arrays with its variable and accumulates their product (or runs
// mma_sync). The same scan finds serial reductions (analyzer_reductions.cpp), in the
// order the assignments come.
loop_accumulations function_analyzer::scan_accumulating_loops(const std::set<int>& mma_loops) {
  loop_accumulations out;
  for (auto& L : loops_) {
    if (L.var < 0 || L.grid_stride || L.tree) continue;
    bool window = false;
    auto kreads = reads_indexed_by(L, window);
    bool product = false;
    for (auto& as : assigns_) {
      if (!in_loop(as.loops, L.id)) continue;
      accumulation acc = accumulation_of(as);
      if (!acc.yes) continue;
      if (accumulates_serially(as, L, kreads)) out.serial_reduction = true;
      if (multiplies_two_sources(as, acc)) product = true;
    }
    // WMMA: fragment loads (already among the reads) and mma_sync in the loop.
    bool wmma_loop = mma_loops.count(L.id) > 0;
    if (!window && kreads.size() >= 2 && (product || wmma_loop)) {
      out.k_loop = true;
      add_gemm_operand_pairs(L, kreads, out.gemm_loops);
    }
  }
  return out;
}

// The memory space of the first access of base b (unknown when there is none).
space_t function_analyzer::space_of_base(const std::string& b) const {
  for (auto& a : accesses_)
    if (a.base == b) return a.space;
  return space_t::unknown;
}

// naive_gemm: a GEMM k-loop whose two operands are read straight from global memory
// (no WMMA fragments, no staging in the loop), unless some k-loop reads an operand from
// shared memory (then the GEMM is tiled).
bool function_analyzer::is_naive_gemm(const std::vector<k_loop_operands>& kloops, const staging& st) const {
  bool naive = false;
  for (auto& k : kloops) {
    bool wmma = false;
    for (auto& a : accesses_)
      if (a.wmma && (a.base == k.p || a.base == k.q)) wmma = true;
    bool staged_operand = false;
    for (auto& [g, reads] : st.staging_reads)
      if (g == k.p || g == k.q)
        for (auto* r : reads)
          if (in_loop(r->loops, k.loop)) staged_operand = true;
    if (space_of_base(k.p) == space_t::global && space_of_base(k.q) == space_t::global && !wmma && !staged_operand)
      naive = true;
  }
  if (naive) {
    // Any k-loop staged through shared memory makes it a tiled GEMM.
    for (auto& k : kloops)
      if (space_of_base(k.p) == space_t::shared || space_of_base(k.q) == space_t::shared) naive = false;
  }
  return naive;
}

// An operand of fp16/bf16 elements, or a shared array staged from one.
bool function_analyzer::is_half_precision_base(const std::string& b, const staging& st) const {
  for (auto& a : accesses_)
    if (a.base == b && (a.base_elem.scalar == "half" || a.base_elem.scalar == "bfloat16")) return true;
  auto sf = st.staged_from.find(b);
  if (sf == st.staged_from.end()) return false;
  for (auto& g : sf->second)
    for (auto& a : accesses_)
      if (a.base == g && (a.base_elem.scalar == "half" || a.base_elem.scalar == "bfloat16")) return true;
  return false;
}

// half_operands: a GEMM k-loop with an fp16/bf16 operand.
bool function_analyzer::has_half_precision_operands(const std::vector<k_loop_operands>& kloops,
                                                    const staging& st) const {
  bool half = false;
  for (auto& k : kloops)
    if (is_half_precision_base(k.p, st) || is_half_precision_base(k.q, st)) half = true;
  return half;
}

}  // namespace ks::features::analysis
