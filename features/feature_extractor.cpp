#include "features/feature_extractor.hpp"

#include <algorithm>
#include <cmath>

#include "features/cuda_syntax.hpp"
#include "features/plan_features.hpp"
#include "features/ptx_scanner.hpp"
#include "features/source_analysis.hpp"
#include "plan/kernel_signatures.hpp"

namespace ks {

const std::vector<std::string>& code_feature_names() {
  // The vocabulary the decision policy reads (policy/evidence_names): one list.
  static const std::vector<std::string> names = evidence_names_of(evidence_kind::feature);
  return names;
}

namespace {

using features::ptx_stats;
using features::source_facts;
using features::unit_facts;

// What the rules read: the input, the kernels the source declares, the facts of the
// source analysis and the counts in the PTX.
struct extraction {
  const feature_input& in;
  std::vector<kernel_signature> sigs;
  source_facts sf;
  ptx_stats px;
  bool have_ptx = false;
  std::vector<const unit_facts*> kernels;  // the analysed units that are kernels
  bool have_source_kernels = false;

  explicit extraction(const feature_input& input) : in(input) {}

  // Some analysed function (kernel or device helper) satisfies pred.
  template <class P>
  bool any(P pred) const {
    for (auto& u : sf.units)
      if (pred(u)) return true;
    return false;
  }
  // The sum of get over the analysed functions.
  template <class G>
  double sum(G get) const {
    double s = 0;
    for (auto& u : sf.units) s += get(u);
    return s;
  }
};

// A fact of some analysed function (features/function_analyzer.hpp names the rule
// that decides it).
bool any_unit(const extraction& e, bool unit_facts::*fact) {
  return e.any([&](const unit_facts& u) { return u.*fact; });
}

double b(bool x) { return x ? 1.0 : 0.0; }

bool half_dtype(const std::string& d) {
  return d == "float16" || d == "bfloat16" || d == "half" || d == "bf16" || d == "fp16" || d == "tf32";
}

// kernel_count: the __global__ functions of the source, else the PTX's entries.
int kernel_count(const extraction& e) {
  int count = static_cast<int>(e.sigs.size());
  if (count == 0 && e.have_ptx) count = e.px.entries;
  return count;
}

// is_pointwise: there are kernels, and every kernel is pointwise.
bool is_pointwise(const extraction& e) {
  bool pointwise = e.have_source_kernels;
  for (auto* k : e.kernels) pointwise = pointwise && k->pointwise;
  return pointwise;
}

// has_reduction: a cross-thread reduction in the source (shared tree, reducing shuffle,
// reduce intrinsic, accumulating atomic); from the PTX alone, shuffles or atomics.
bool has_reduction(const extraction& e) {
  bool reduction =
      any_unit(e, &unit_facts::cross_thread_reduction) || e.sf.lex.shuffle_reduction || e.sf.lex.reduce_intrinsics;
  if (!e.have_source_kernels && e.have_ptx) reduction = reduction || e.px.shuffles > 0 || e.px.atomics > 0;
  return reduction;
}

bool uses_warp_shuffle(const extraction& e) { return e.sf.lex.shuffles > 0 || e.px.shuffles > 0; }

bool uses_atomics(const extraction& e) { return e.sf.lex.atomics > 0 || e.px.atomics > 0; }

// uses_shared_memory: declared or accessed, in the source or the PTX.
bool uses_shared_memory(const extraction& e) {
  return e.sf.lex.shared_decl || any_unit(e, &unit_facts::shared_used) || e.px.declares_shared ||
         e.px.shared_accesses > 0;
}

// uses_vector_loads: from the PTX when there is one (it knows what the compiler made of
// the source), else from the source.
bool uses_vector_loads(const extraction& e) {
  if (e.have_ptx) return e.px.vector_global_loads > 0;
  return any_unit(e, &unit_facts::vector_load);
}

// uses_vector_stores: as uses_vector_loads.
bool uses_vector_stores(const extraction& e) {
  if (e.have_ptx) return e.px.vector_global_stores > 0;
  return any_unit(e, &unit_facts::vector_store);
}

// vector_width: the widest global access of the source or the PTX.
int vector_width(const extraction& e) {
  int width = 1;
  for (auto& u : e.sf.units) width = std::max(width, u.vector_width);
  if (e.have_ptx) width = std::max(width, e.px.max_vector_lanes);
  return width;
}

// has_tail_handling: some kernel handles the elements past its main loop or tile.
bool has_tail_handling(const extraction& e) {
  bool tail = false;
  for (auto* k : e.kernels) tail = tail || k->tail;
  return tail;
}

// uses_tensor_cores: WMMA/MMA in the source (calls or inline asm) or the PTX.
bool uses_tensor_cores(const extraction& e) { return e.sf.lex.tensor_cores || e.px.tensor_ops > 0; }

// tensor_core_eligible: tensor cores in use, or a GEMM-like k-loop with half-precision
// operands (the task's dtype or the operands' type).
bool is_tensor_core_eligible(const extraction& e) {
  bool half = half_dtype(e.in.dtype);
  return uses_tensor_cores(e) || e.any([&](const unit_facts& u) { return u.gemm_like && (half || u.half_operands); });
}

// transcendental_count: calls in the source; from the PTX alone, its transcendental
// instructions.
int transcendental_count(const extraction& e) {
  int transcendental = e.sf.lex.transcendental;
  if (!e.have_source_kernels && e.have_ptx && transcendental == 0) transcendental = e.px.transcendental_ops;
  return transcendental;
}

// uses_fast_math_intrinsics: fast-math calls or .approx asm in the source, approximate
// instructions in the PTX.
bool uses_fast_math(const extraction& e) { return e.sf.lex.fast_math || e.px.approx_math > 0; }

// syncthreads_count: __syncthreads calls in the source; from the PTX alone, barriers.
int syncthreads_count(const extraction& e) {
  int barriers = e.sf.lex.syncthreads;
  if (!e.have_source_kernels && e.have_ptx) barriers = e.px.barriers;
  return barriers;
}

// reuse_factor: the largest of the analysed functions.
double reuse_factor(const extraction& e) {
  double reuse = 1;
  for (auto& u : e.sf.units) reuse = std::max(reuse, u.reuse);
  return reuse;
}

// registers and spills: the maximum over the compiler's per-kernel report; without one,
// spills is the largest local depot of the PTX, or else the bytes of the local arrays
// the source indexes at run time.
void set_resource_features(const extraction& e, std::map<std::string, double>& v) {
  if (!e.in.resources.empty()) {
    int regs = 0, local = 0;
    for (auto& r : e.in.resources) {
      regs = std::max(regs, r.registers);
      local = std::max(local, r.local_bytes);
    }
    v["registers"] = regs;
    v["spills"] = local;
  } else if (e.have_ptx) {
    v["spills"] = static_cast<double>(e.px.max_local_depot);
  } else {
    long long local = 0;
    for (auto& u : e.sf.units) local = std::max(local, u.local_array_bytes);
    v["spills"] = static_cast<double>(local);
  }
}

// structure_class, the first that applies: multi_kernel (two or more launches),
// irregular (data-dependent indexing), reuse (a GEMM, a stencil or shared tiles),
// reduction (cross-thread or serial, a k-loop, atomics), reuse (tensor ops in the PTX
// alone), streaming.
std::string classify_structure(const extraction& e, int launches_total) {
  bool irregular = any_unit(e, &unit_facts::irregular);
  bool reuse_like = e.any([](const unit_facts& u) { return u.gemm_like || u.stencil || u.shared_tiles; });
  bool reduction_like = has_reduction(e) || e.any([](const unit_facts& u) { return u.serial_reduction || u.k_loop; }) ||
                        e.sf.lex.atomics > 0;
  if (launches_total >= 2) return "multi_kernel";
  if (irregular) return "irregular";
  if (reuse_like) return "reuse";
  if (reduction_like) return "reduction";
  if (!e.have_source_kernels && e.have_ptx && e.px.tensor_ops > 0) return "reuse";
  return "streaming";
}

code_features extract_impl(const feature_input& in) {
  code_features cf;
  auto& v = cf.values;
  extraction e(in);
  auto ps = features::parse_source(in.source);
  e.sigs = extract_kernel_signatures(in.source);
  auto launches = features::launches_from(in.resolved, e.sigs);
  e.sf = features::analyze_source(ps, launches, nominal_problem_extent);
  e.px = features::scan_ptx(in.ptx);
  e.have_ptx = e.px.present;
  for (auto& u : e.sf.units)
    if (u.is_kernel) e.kernels.push_back(&u);
  e.have_source_kernels = !e.kernels.empty();

  // ---- kernels and the plan
  const int kernels = kernel_count(e);
  v["kernel_count"] = kernels;
  const features::plan_step_counts steps = features::count_plan_steps(in);
  if (steps.kernels >= 0) {
    v["plan_kernel_launches"] = steps.kernels;
    v["plan_library_steps"] = steps.library;
  }

  // ---- structure of the code
  v["is_pointwise"] = b(is_pointwise(e));
  v["has_reduction"] = b(has_reduction(e));
  v["uses_warp_shuffle"] = b(uses_warp_shuffle(e));
  v["uses_atomics"] = b(uses_atomics(e));
  v["uses_shared_memory"] = b(uses_shared_memory(e));
  v["shared_mem_tiles"] = b(any_unit(e, &unit_facts::shared_tiles));

  // ---- vectorization
  v["uses_vector_loads"] = b(uses_vector_loads(e));
  v["uses_vector_stores"] = b(uses_vector_stores(e));
  v["vector_width"] = vector_width(e);
  v["vector_alignment_checked"] = b(any_unit(e, &unit_facts::align_checked));
  v["uses_vector_types"] = b(e.sf.lex.vector_types);

  // ---- guards and loops
  v["has_tail_handling"] = b(has_tail_handling(e));
  v["has_bounds_check"] = b(any_unit(e, &unit_facts::bounds_check));
  v["grid_stride_loop"] = b(any_unit(e, &unit_facts::grid_stride));
  v["unrolled_loops"] = e.sum([](const unit_facts& u) { return u.unrolled; });

  // ---- GEMM, tensor cores, stencils
  v["has_k_loop"] = b(any_unit(e, &unit_facts::k_loop));
  v["naive_gemm"] = b(any_unit(e, &unit_facts::naive_gemm));
  v["tensor_core_eligible"] = b(is_tensor_core_eligible(e));
  v["uses_tensor_cores"] = b(uses_tensor_cores(e));
  v["stencil_or_conv"] = b(any_unit(e, &unit_facts::stencil));

  // ---- math, divergence, barriers
  v["transcendental_count"] = transcendental_count(e);
  v["uses_fast_math_intrinsics"] = b(uses_fast_math(e));
  v["divergent_branches"] = e.sum([](const unit_facts& u) { return u.divergent; });
  v["syncthreads_count"] = syncthreads_count(e);
  v["reuse_factor"] = reuse_factor(e);

  // ---- resources and the launch
  set_resource_features(e, v);
  features::set_launch_geometry(in, v);
  features::set_cuda_graph_eligibility(in, v);

  // ---- structure class
  int launches_total = steps.kernels >= 0 ? steps.kernels + steps.library : kernels;
  cf.structure_class = classify_structure(e, launches_total);
  return cf;
}

}  // namespace

code_features extract_features(const feature_input& input) {
  try {
    return extract_impl(input);
  } catch (...) {
    // Defaults that claim nothing: every structural feature off, the simplest class.
    code_features cf;
    cf.structure_class = "streaming";
    for (auto& name : code_feature_names()) {
      if (name == "plan_kernel_launches" || name == "plan_library_steps" || name == "registers" ||
          name == "block_size" || name == "grid_size" || name == "cuda_graph_eligible")
        continue;
      cf.values[name] = 0;
    }
    cf.values["vector_width"] = 1;
    cf.values["reuse_factor"] = 1;
    return cf;
  }
}

}  // namespace ks
