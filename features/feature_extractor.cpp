#include "features/feature_extractor.hpp"

#include <algorithm>
#include <cmath>

#include "features/cuda_syntax.hpp"
#include "features/ptx_scanner.hpp"
#include "features/source_analysis.hpp"
#include "plan/kernel_signatures.hpp"
#include "plan/shape_expr.hpp"

namespace ks {

const std::vector<std::string>& code_feature_names() {
  // The vocabulary the decision policy reads (policy/evidence_names): one list.
  static const std::vector<std::string> names = evidence_names_of(evidence_kind::feature);
  return names;
}

namespace {

using features::launch_info;
using features::ptx_stats;
using features::source_facts;
using features::unit_facts;

// Launch facts per kernel name from a resolved plan: the first step launching it.
std::map<std::string, launch_info> launches_from(const resolved_plan* rp,
                                                 const std::vector<kernel_signature>& sigs) {
  std::map<std::string, launch_info> out;
  if (!rp) return out;
  for (auto& s : rp->steps) {
    if (s.kind != "kernel" || out.count(s.name)) continue;
    launch_info li;
    for (int d = 0; d < 3; ++d) {
      li.grid[d] = s.grid[d];
      li.block[d] = s.block[d];
    }
    if (const kernel_signature* k = find_kernel(sigs, s.name)) {
      for (size_t i = 0; i < s.args.size() && i < k->params.size(); ++i)
        if (s.args[i].kind == "int" && !k->params[i].name.empty())
          li.int_params[k->params[i].name] = s.args[i].int_value;
    }
    out[s.name] = li;
  }
  return out;
}

// Evaluates an expression of a plan that uses plan constants only (no shapes).
std::optional<int64_t> eval_static(const std::string& text, const launch_plan& plan) {
  expr_env env;
  // Constants may refer to each other: evaluate in rounds until nothing changes.
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (auto& [name, expr] : plan.constants) {
      if (env.constants.count(name)) continue;
      auto v = eval_expr(expr, env);
      if (v.ok()) {
        env.constants[name] = v.value();
        changed = true;
      }
    }
    if (!changed) break;
  }
  auto v = eval_expr(text, env);
  if (!v.ok() || v->is_float) return std::nullopt;
  return v->i;
}

bool half_dtype(const std::string& d) {
  return d == "float16" || d == "bfloat16" || d == "half" || d == "bf16" || d == "fp16" ||
         d == "tf32";
}

code_features extract_impl(const feature_input& in) {
  code_features cf;
  auto& v = cf.values;
  auto ps = features::parse_source(in.source);
  auto sigs = extract_kernel_signatures(in.source);
  auto launches = launches_from(in.resolved, sigs);
  source_facts sf = features::analyze_source(ps, launches, nominal_problem_extent);
  ptx_stats px = features::scan_ptx(in.ptx);
  const bool have_ptx = px.present;

  std::vector<const unit_facts*> kernels;
  for (auto& u : sf.units)
    if (u.is_kernel) kernels.push_back(&u);
  const bool have_source_kernels = !kernels.empty();
  auto any = [&](auto pred) {
    for (auto& u : sf.units)
      if (pred(u)) return true;
    return false;
  };
  auto sum = [&](auto get) {
    double s = 0;
    for (auto& u : sf.units) s += get(u);
    return s;
  };
  auto b = [](bool x) { return x ? 1.0 : 0.0; };

  // ---- kernels and the plan
  int kernel_count = static_cast<int>(sigs.size());
  if (kernel_count == 0 && have_ptx) kernel_count = px.entries;
  v["kernel_count"] = kernel_count;

  int plan_kernels = -1, plan_library = -1;
  if (in.plan) {
    plan_kernels = plan_library = 0;
    for (auto& s : in.plan->steps) (s.kind == "library" ? plan_library : plan_kernels)++;
  } else if (in.resolved) {
    plan_kernels = plan_library = 0;
    for (auto& s : in.resolved->steps) (s.kind == "library" ? plan_library : plan_kernels)++;
  }
  if (plan_kernels >= 0) {
    v["plan_kernel_launches"] = plan_kernels;
    v["plan_library_steps"] = plan_library;
  }

  // ---- structure of the code
  bool pointwise = have_source_kernels;
  for (auto* k : kernels) pointwise = pointwise && k->pointwise;
  v["is_pointwise"] = b(pointwise);

  bool reduction = any([](const unit_facts& u) { return u.cross_thread_reduction; }) ||
                   sf.lex.shuffle_reduction || sf.lex.reduce_intrinsics;
  if (!have_source_kernels && have_ptx) reduction = reduction || px.shuffles > 0 || px.atomics > 0;
  v["has_reduction"] = b(reduction);
  v["uses_warp_shuffle"] = b(sf.lex.shuffles > 0 || px.shuffles > 0);
  v["uses_atomics"] = b(sf.lex.atomics > 0 || px.atomics > 0);
  v["uses_shared_memory"] = b(sf.lex.shared_decl || any([](const unit_facts& u) { return u.shared_used; }) ||
                              px.declares_shared || px.shared_accesses > 0);
  v["shared_mem_tiles"] = b(any([](const unit_facts& u) { return u.shared_tiles; }));

  // ---- vectorization
  bool src_vload = any([](const unit_facts& u) { return u.vector_load; });
  bool src_vstore = any([](const unit_facts& u) { return u.vector_store; });
  int width = 1;
  for (auto& u : sf.units) width = std::max(width, u.vector_width);
  if (have_ptx) {
    v["uses_vector_loads"] = b(px.vector_global_loads > 0);
    v["uses_vector_stores"] = b(px.vector_global_stores > 0);
    width = std::max(width, px.max_vector_lanes);
  } else {
    v["uses_vector_loads"] = b(src_vload);
    v["uses_vector_stores"] = b(src_vstore);
  }
  v["vector_width"] = width;
  v["vector_alignment_checked"] = b(any([](const unit_facts& u) { return u.align_checked; }));
  v["uses_vector_types"] = b(sf.lex.vector_types);

  // ---- guards and loops
  bool tail = false;
  for (auto* k : kernels) tail = tail || k->tail;
  v["has_tail_handling"] = b(tail);
  v["has_bounds_check"] = b(any([](const unit_facts& u) { return u.bounds_check; }));
  v["grid_stride_loop"] = b(any([](const unit_facts& u) { return u.grid_stride; }));
  v["unrolled_loops"] = sum([](const unit_facts& u) { return u.unrolled; });

  // ---- GEMM, tensor cores, stencils
  bool tensor_cores = sf.lex.tensor_cores || px.tensor_ops > 0;
  v["has_k_loop"] = b(any([](const unit_facts& u) { return u.k_loop; }));
  v["naive_gemm"] = b(any([](const unit_facts& u) { return u.naive_gemm; }));
  bool half = half_dtype(in.dtype);
  v["tensor_core_eligible"] =
      b(tensor_cores || any([&](const unit_facts& u) { return u.gemm_like && (half || u.half_operands); }));
  v["uses_tensor_cores"] = b(tensor_cores);
  v["stencil_or_conv"] = b(any([](const unit_facts& u) { return u.stencil; }));

  // ---- math, divergence, barriers
  int transcendental = sf.lex.transcendental;
  if (!have_source_kernels && have_ptx && transcendental == 0) transcendental = px.transcendental_ops;
  v["transcendental_count"] = transcendental;
  v["uses_fast_math_intrinsics"] = b(sf.lex.fast_math || px.approx_math > 0);
  v["divergent_branches"] = sum([](const unit_facts& u) { return u.divergent; });
  int barriers = sf.lex.syncthreads;
  if (!have_source_kernels && have_ptx) barriers = px.barriers;
  v["syncthreads_count"] = barriers;

  double reuse = 1;
  for (auto& u : sf.units) reuse = std::max(reuse, u.reuse);
  v["reuse_factor"] = reuse;

  // ---- resources
  if (!in.resources.empty()) {
    int regs = 0, local = 0;
    for (auto& r : in.resources) {
      regs = std::max(regs, r.registers);
      local = std::max(local, r.local_bytes);
    }
    v["registers"] = regs;
    v["spills"] = local;
  } else if (have_ptx) {
    v["spills"] = static_cast<double>(px.max_local_depot);
  } else {
    long long local = 0;
    for (auto& u : sf.units) local = std::max(local, u.local_array_bytes);
    v["spills"] = static_cast<double>(local);
  }

  // ---- launch geometry
  const plan_step* first_plan_kernel = nullptr;
  if (in.plan)
    for (auto& s : in.plan->steps)
      if (s.kind != "library") {
        first_plan_kernel = &s;
        break;
      }
  const resolved_step* first_resolved = nullptr;
  if (in.resolved)
    for (auto& s : in.resolved->steps)
      if (s.kind == "kernel") {
        first_resolved = &s;
        break;
      }
  if (first_resolved) {
    const auto& bl = first_resolved->block;
    const auto& gr = first_resolved->grid;
    v["block_size"] = static_cast<double>(bl[0] * bl[1] * bl[2]);
    v["grid_size"] = static_cast<double>(gr[0] * gr[1] * gr[2]);
  } else if (first_plan_kernel) {
    auto product = [&](const std::vector<std::string>& dims) -> std::optional<int64_t> {
      int64_t p = 1;
      if (dims.empty()) return std::nullopt;
      for (auto& d : dims) {
        auto x = eval_static(d, *in.plan);
        if (!x) return std::nullopt;
        p *= *x;
      }
      return p;
    };
    if (auto bs = product(first_plan_kernel->block)) v["block_size"] = static_cast<double>(*bs);
    if (auto gs = product(first_plan_kernel->grid)) v["grid_size"] = static_cast<double>(*gs);
  }
  if (in.plan || in.resolved) {
    size_t steps = in.plan ? in.plan->steps.size() : in.resolved->steps.size();
    bool static_shapes = true;
    if (in.resolved)
      for (auto& buf : in.resolved->intermediates)
        if (!buf.shape_known) static_shapes = false;
    v["cuda_graph_eligible"] = b(steps >= 2 && static_shapes);
  }

  // ---- structure class
  int launches_total = plan_kernels >= 0 ? plan_kernels + plan_library : kernel_count;
  bool irregular = any([](const unit_facts& u) { return u.irregular; });
  bool reuse_like = any([](const unit_facts& u) { return u.gemm_like || u.stencil || u.shared_tiles; });
  bool reduction_like = reduction || any([](const unit_facts& u) {
                          return u.serial_reduction || u.k_loop;
                        }) || sf.lex.atomics > 0;
  if (launches_total >= 2) cf.structure_class = "multi_kernel";
  else if (irregular) cf.structure_class = "irregular";
  else if (reuse_like) cf.structure_class = "reuse";
  else if (reduction_like) cf.structure_class = "reduction";
  else if (!have_source_kernels && have_ptx && px.tensor_ops > 0) cf.structure_class = "reuse";
  else cf.structure_class = "streaming";
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
