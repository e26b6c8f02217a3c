// run(): the per-function analysis from start to end (features/function_analyzer.hpp):
// the parameters, pass 1, the loops' shapes, pass 2, then every classification rule, one
// line per fact of unit_facts, naming the rule that decides it. The rules live with
// their concern: analyzer_loops, analyzer_index, analyzer_guards, analyzer_reductions,
// analyzer_gemm, analyzer_shared and analyzer_reuse.
//
// The order of the rules is part of the result: dependencies, polynomials and memory
// sources are memoised as they are first asked for (a variable whose definition is
// cyclic keeps what the first question found), so the rules ask in a fixed order, and
// a rule whose answer is already known is still asked where it asks for values.
#include "features/function_analyzer.hpp"

#include <set>
#include <string>
#include <vector>

namespace ks::features::analysis {

// The parameters: pointers of a kernel point to global memory, those of a device
// helper to unknown memory.
void function_analyzer::declare_parameters() {
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
}

// Pass 2: the accesses, assignments, conditions and calls of every item.
void function_analyzer::run_pass_2() {
  for (size_t i = 0; i < items_.size(); ++i) {
    item_rec& it = items_[i];
    vctx c{static_cast<int>(i), ""};
    if (it.role == role_t::decl_init && it.var >= 0) c.target = vars_[static_cast<size_t>(it.var)].key;
    visit(*it.x, it.x->root, use::read, c);
    if (it.role == role_t::cond_if || it.role == role_t::cond_while || it.role == role_t::cond_for ||
        it.role == role_t::cond_switch) {
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
}

unit_facts function_analyzer::run() {
  unit_facts uf;
  uf.name = f_.name;
  uf.is_kernel = f_.is_kernel;
  declare_parameters();
  // Pass 1.
  std::vector<int> loops;
  std::vector<guard> guards;
  walk(f_.tree, loops, guards);
  scopes_.clear();
  derive_loops();
  run_pass_2();
  index_neighbours();

  uf.global_write = writes_global_memory();
  uf.shared_used = uses_shared_memory();
  const std::set<int> mma_loops = loops_with_mma();
  const bool intrinsic_reduction = reduces_through_intrinsics();
  const bool tree_reduction = has_shared_tree_reduction();
  uf.cross_thread_reduction = intrinsic_reduction || tree_reduction;
  uf.irregular = has_data_dependent_index();
  const bool grid_stride_for = has_grid_stride_for_loop();
  uf.unrolled = count_unrolled_loops();
  const bool grid_stride_while = has_grid_stride_while_loop();
  uf.grid_stride = grid_stride_for || grid_stride_while;
  for (auto& c : conds_) {
    if (is_bounds_check(c)) uf.bounds_check = true;
    if (is_divergent_branch(c)) ++uf.divergent;
  }
  uf.vector_access = has_vector_access();
  uf.vector_width = widest_vector_access();
  uf.vector_load = has_vector_load();
  uf.vector_store = has_vector_store();
  const loop_accumulations acc = scan_accumulating_loops(mma_loops);
  uf.serial_reduction = acc.serial_reduction;
  uf.k_loop = acc.k_loop;
  const staging st = find_staging();
  uf.shared_tiles = has_shared_memory_tiling(st);
  uf.stencil = is_stencil();
  uf.gemm_like = !acc.gemm_loops.empty();
  uf.naive_gemm = is_naive_gemm(acc.gemm_loops, st);
  uf.half_operands = has_half_precision_operands(acc.gemm_loops, st);
  uf.tail = has_tail_handling(uf, st);
  uf.align_checked = is_alignment_checked(uf);
  uf.local_array_bytes = local_array_bytes();
  uf.pointwise = is_pointwise(uf);
  uf.reuse = reuse_factor(acc.gemm_loops, st);
  return uf;
}

}  // namespace ks::features::analysis
