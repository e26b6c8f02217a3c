// reuse_factor of the per-function analysis (features/function_analyzer.hpp): how many
// times each element read from global memory is used. For a GEMM k-loop, the output
// extent an operand is not indexed by (divided by the tile when the operand is staged
// through shared memory or WMMA fragments); otherwise, re-reads: stencil taps, window
// loops and passes over the same data. docs/features.md, reuse_factor.
#include "features/function_analyzer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ks::features::analysis {

// What every reuse rule reads: the global writes, the output dimensions they span
// (blockIdx dimensions), and the numeric block sizes substituted into their indices.
struct function_analyzer::reuse_context {
  std::set<char> out_dims;
  std::vector<const access_rec*> gwrites;
  std::map<std::string, long long> numeric;
};

function_analyzer::reuse_context function_analyzer::make_reuse_context() const {
  reuse_context rc;
  // Output dimensions and per-block extents (from the writes).
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.write && a.index.ok) {
      rc.gwrites.push_back(&a);
      auto bd = block_dims(a.index);
      rc.out_dims.insert(bd.begin(), bd.end());
    }
  for (int d = 0; d < 3; ++d) {
    std::string dn(1, "xyz"[d]);
    long long bd = launch_ && launch_->block[d] > 0 ? launch_->block[d] : 0;
    if (bd > 0) rc.numeric["blockDim." + dn] = bd;
  }
  // Only blockDim is substituted: with the sizes symbolic, a coefficient of another
  // dimension (N for a row) cannot divide the block's coefficient by accident.
  // Without a launch, a 2-D shared tile [Y][X] suggests the block's shape.
  for (auto& v : vars_) {
    if (v.space != space_t::shared || v.dims.size() != 2 || v.dims[0] <= 0 || v.dims[1] <= 0) continue;
    if (!rc.numeric.count("blockDim.x") && v.dims[0] == v.dims[1]) {
      rc.numeric["blockDim.x"] = v.dims[1];
      rc.numeric["blockDim.y"] = v.dims[0];
    }
    break;
  }
  return rc;
}

// The extent of a block along grid dimension d: the largest multiple of a sub-block
// atom's coefficient that blockIdx.d's coefficient is, over the writes (0 if none).
long long function_analyzer::block_extent(const reuse_context& rc, char d) const {
  std::string b = std::string("blockIdx.") + d;
  long long best = 0;
  for (auto* w : rc.gwrites) {
    poly idx = substitute(w->index, rc.numeric);
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
}

// The problem's extent along grid dimension d: grid × block extent from the launch, the
// nominal extent without one.
double function_analyzer::extent(const reuse_context& rc, char d) const {
  int di = d - 'x';
  if (launch_ && launch_->grid[di] > 0) {
    long long m = block_extent(rc, d);
    if (m <= 0) m = launch_->block[di] > 0 ? launch_->block[di] : 1;
    return static_cast<double>(launch_->grid[di]) * static_cast<double>(m);
  }
  return nominal_;
}

// The reuse of one global read site of a GEMM operand: the product of the output
// extents it is not indexed by (per tile when staged).
double function_analyzer::site_reuse(const reuse_context& rc, const access_rec& s, bool site_staged) const {
  auto bd = block_dims(s.index);
  double r = 1;
  bool any = false;
  for (char d : rc.out_dims) {
    if (bd.count(d)) continue;
    any = true;
    double e = extent(rc, d);
    if (site_staged) {
      long long m = s.wmma ? 16 : block_extent(rc, d);
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
  return r;
}

// The reuse of a GEMM operand: the best of its global read sites, direct or the reads
// staged into it (0 when it has none).
double function_analyzer::operand_reuse(const reuse_context& rc, const staging& st, const std::string& op) const {
  // Global reads of this operand: direct, or the reads staged into it.
  std::vector<const access_rec*> sites;
  bool staged = false;
  bool frag = false;
  for (auto& a : accesses_)
    if (a.base == op && a.read && a.space == space_t::global) {
      sites.push_back(&a);
      if (a.wmma) frag = true;
    }
  auto sf = st.staged_from.find(op);
  if (sites.empty() || (!frag && sf != st.staged_from.end() && !sf->second.empty())) {
    if (sf != st.staged_from.end())
      for (auto& g : sf->second) {
        auto sr = st.staging_reads.find(g);
        if (sr != st.staging_reads.end())
          for (auto* r : sr->second) sites.push_back(r);
      }
    staged = true;
  }
  if (frag) staged = true;
  double best = 0;
  for (auto* s : sites) {
    bool site_staged = staged || s->wmma;
    for (auto& [g, reads] : st.staging_reads)
      for (auto* r : reads)
        if (r == s) site_staged = true;
    best = std::max(best, site_reuse(rc, *s, site_staged));
  }
  return best;
}

// GEMM reuse: the mean over the two operands of each k-loop, the best k-loop.
double function_analyzer::gemm_reuse(const reuse_context& rc, const std::vector<k_loop_operands>& kloops,
                                     const staging& st) const {
  double reuse = 1;
  for (auto& k : kloops) {
    double sum = 0;
    int count = 0;
    for (const std::string& op : {k.p, k.q}) {
      double best = operand_reuse(rc, st, op);
      if (best > 0) {
        sum += best;
        ++count;
      }
    }
    if (count > 0) reuse = std::max(reuse, sum / count);
  }
  return reuse;
}

// Broadcast operands (indexed by fewer thread atoms than the output) do not count.
bool function_analyzer::is_broadcast_operand(const std::vector<const access_rec*>& sites,
                                             const std::set<std::string>& write_atoms) const {
  bool broadcast = !write_atoms.empty();
  for (auto* s : sites) {
    auto ta = thread_atoms(s->index);
    bool strict =
        ta.size() < write_atoms.size() && std::includes(write_atoms.begin(), write_atoms.end(), ta.begin(), ta.end());
    if (!strict) broadcast = false;
  }
  return broadcast;
}

// How many positions a read takes in the window loops around it (the trip count, 3
// when unknown).
double function_analyzer::window_taps(const access_rec& a) const {
  double t = 1;
  for (int l : a.loops)
    if (window_var(a, l)) {
      long long tr = trip_of(l);
      t *= tr > 0 ? static_cast<double>(tr) : 3.0;
    }
  return t;
}

// The re-reads of one array's global read sites: the largest group of taps of one
// stencil and passes over the same elements, each distinct index counted with its
// window taps.
double function_analyzer::base_reread_reuse(const std::vector<const access_rec*>& sites,
                                            const std::set<std::string>& fresh_loop_atoms,
                                            const std::set<const access_rec*>& staged_set) {
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
    t = std::max(t, window_taps(*sites[i]));
  }
  double reuse = 0;
  for (auto& [root, per_raw] : group_taps) {
    double total = 0;
    for (auto& [k, t] : per_raw) total += t;
    reuse = std::max(reuse, total);
  }
  return reuse;
}

// Re-read reuse without a k-loop: the best array (broadcast operands aside).
double function_analyzer::reread_reuse(const reuse_context& rc, const staging& st) {
  // Re-reads: neighbours (stencil taps, window loops) and passes over the same data.
  reads_by_base by_base;
  for (auto& a : accesses_)
    if (a.space == space_t::global && a.read && !a.atomic) by_base[a.base].push_back(&a);
  std::set<std::string> write_atoms;
  for (auto* w : rc.gwrites) {
    auto s = thread_atoms(w->index);
    write_atoms.insert(s.begin(), s.end());
  }
  // Variables a loop (re)initialises: each such loop is a new pass over its range.
  std::set<std::string> fresh_loop_atoms;
  for (auto& L : loops_)
    if (L.var >= 0 && (vars_[static_cast<size_t>(L.var)].loop_id == L.id || L.init != nullptr))
      fresh_loop_atoms.insert(var_atom(L.var));
  std::set<const access_rec*> staged_set;
  for (auto& [g, reads] : st.staging_reads) staged_set.insert(reads.begin(), reads.end());
  double reuse = 1;
  for (auto& [b, sites] : by_base) {
    if (is_broadcast_operand(sites, write_atoms)) continue;
    reuse = std::max(reuse, base_reread_reuse(sites, fresh_loop_atoms, staged_set));
  }
  return reuse;
}

// reuse_factor, rounded to two decimals: GEMM operand reuse when there are k-loops,
// re-read reuse otherwise.
double function_analyzer::reuse_factor(const std::vector<k_loop_operands>& kloops, const staging& st) {
  reuse_context rc = make_reuse_context();
  double reuse = !kloops.empty() ? gemm_reuse(rc, kloops, st) : reread_reuse(rc, st);
  return std::round(reuse * 100.0) / 100.0;
}

}  // namespace ks::features::analysis
