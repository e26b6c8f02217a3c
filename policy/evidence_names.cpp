#include "policy/evidence_names.hpp"

namespace ks {

namespace {

using K = evidence_kind;
using T = evidence_type;

// Keep in step with docs/metrics.md (skill_library_test compares the two).
const std::vector<evidence_name> table = {
    // Profile metrics (profile_metrics.values; kernel_launches and duration_us are
    // also filled from the profile's own fields).
    {"dram_throughput_pct", K::metric, T::number, "DRAM bandwidth used, % of peak"},
    {"l2_throughput_pct", K::metric, T::number, "L2 bandwidth used, % of peak"},
    {"l1_throughput_pct", K::metric, T::number, "L1/TEX bandwidth used, % of peak"},
    {"sm_throughput_pct", K::metric, T::number, "SM (compute) throughput, % of peak"},
    {"achieved_occupancy_pct", K::metric, T::number, "achieved active warps / max, %"},
    {"theoretical_occupancy_pct", K::metric, T::number, "occupancy the launch allows, %"},
    {"occupancy_limit_registers", K::metric, T::number, "blocks per SM allowed by registers"},
    {"occupancy_limit_shared_mem", K::metric, T::number, "blocks per SM allowed by shared memory"},
    {"occupancy_limit_warps", K::metric, T::number, "blocks per SM allowed by warps"},
    {"occupancy_limit_blocks", K::metric, T::number, "blocks per SM hardware limit"},
    {"stall_long_scoreboard_pct", K::metric, T::number, "% of stalls waiting on global/local memory"},
    {"stall_short_scoreboard_pct", K::metric, T::number, "% of stalls waiting on MIO (shared memory, special math)"},
    {"stall_barrier_pct", K::metric, T::number, "% of stalls at __syncthreads"},
    {"stall_math_pipe_throttle_pct", K::metric, T::number, "% of stalls on a busy math pipe"},
    {"stall_mio_throttle_pct", K::metric, T::number, "% of stalls on a full MIO queue"},
    {"stall_lg_throttle_pct", K::metric, T::number, "% of stalls on a full local/global queue"},
    {"stall_wait_pct", K::metric, T::number, "% of stalls on fixed-latency dependencies"},
    {"stall_not_selected_pct", K::metric, T::number, "% of stalls eligible but not selected"},
    {"stall_membar_pct", K::metric, T::number, "% of stalls at memory barriers"},
    {"branch_efficiency_pct", K::metric, T::number, "non-divergent branches / branches, %"},
    {"eligible_warps_per_cycle", K::metric, T::number, "eligible warps per scheduler per cycle"},
    {"issued_ipc", K::metric, T::number, "instructions issued per cycle per SM"},
    {"tensor_pipe_pct", K::metric, T::number, "tensor-core pipe utilisation, %"},
    {"fp32_pipe_pct", K::metric, T::number, "FMA pipe utilisation, %"},
    {"l1_hit_rate_pct", K::metric, T::number, "L1 hit rate, %"},
    {"l2_hit_rate_pct", K::metric, T::number, "L2 hit rate, %"},
    {"dram_bytes", K::metric, T::number, "bytes moved to/from DRAM"},
    {"flops", K::metric, T::number, "floating-point operations"},
    {"duration_us", K::metric, T::number, "kernel time summed over the plan's kernels, µs"},
    {"kernel_launches", K::metric, T::number, "kernels launched by one run of the plan"},
    {"waves_per_sm", K::metric, T::number, "grid blocks / (SMs × blocks per SM)"},
    {"registers_per_thread", K::metric, T::number, "registers per thread of the longest kernel"},
    {"shared_mem_per_block", K::metric, T::number, "shared memory bytes per block of the longest kernel"},
    {"local_bytes_per_thread", K::metric, T::number, "local memory bytes per thread of the longest kernel"},
    // Code features (code_features.values).
    {"kernel_count", K::feature, T::number, "__global__ kernels in the source"},
    {"plan_kernel_launches", K::feature, T::number, "kernel steps in the launch plan"},
    {"plan_library_steps", K::feature, T::number, "library (ATen) steps in the launch plan"},
    {"is_pointwise", K::feature, T::number, "each output element depends only on same-index inputs"},
    {"has_reduction", K::feature, T::number, "accumulates across threads"},
    {"uses_warp_shuffle", K::feature, T::number, "__shfl_*_sync"},
    {"uses_atomics", K::feature, T::number, "atomic*"},
    {"uses_shared_memory", K::feature, T::number, "__shared__ arrays or dynamic shared memory"},
    {"shared_mem_tiles", K::feature, T::number, "shared-memory tiles reused across a loop"},
    {"uses_vector_loads", K::feature, T::number, "64/128-bit global loads"},
    {"uses_vector_stores", K::feature, T::number, "64/128-bit global stores"},
    {"vector_width", K::feature, T::number, "widest vector access in elements"},
    {"vector_alignment_checked", K::feature, T::number, "alignment checked before vector access"},
    {"uses_vector_types", K::feature, T::number, "CUDA vector types in arithmetic"},
    {"has_tail_handling", K::feature, T::number, "handles the remainder of vector/tile sizes"},
    {"has_bounds_check", K::feature, T::number, "guards indices against the size"},
    {"grid_stride_loop", K::feature, T::number, "loops over the data with a grid stride"},
    {"unrolled_loops", K::feature, T::number, "#pragma unroll or manual unrolling"},
    {"has_k_loop", K::feature, T::number, "a dot-product loop over a shared dimension"},
    {"naive_gemm", K::feature, T::number, "k-loop reading both operands from global memory"},
    {"tensor_core_eligible", K::feature, T::number, "GEMM-like k-loop on tensor-core-friendly data"},
    {"uses_tensor_cores", K::feature, T::number, "wmma / mma.sync / wgmma"},
    {"stencil_or_conv", K::feature, T::number, "neighbour access with fixed offsets"},
    {"transcendental_count", K::feature, T::number, "exp/log/tanh/erf/sin/cos/pow/sqrt/rsqrt calls"},
    {"uses_fast_math_intrinsics", K::feature, T::number, "__expf, __logf, __fdividef, rsqrtf …"},
    {"divergent_branches", K::feature, T::number, "branches on the thread index within a warp"},
    {"syncthreads_count", K::feature, T::number, "__syncthreads() calls"},
    {"reuse_factor", K::feature, T::number, "estimated loads of each global element"},
    {"registers", K::feature, T::number, "registers per thread (max over kernels)"},
    {"spills", K::feature, T::number, "local memory bytes per thread (max over kernels)"},
    {"block_size", K::feature, T::number, "threads per block of the first kernel step"},
    {"grid_size", K::feature, T::number, "blocks of the first kernel step"},
    {"cuda_graph_eligible", K::feature, T::number, "several static launches without host sync"},
    // The feature extractor's classification.
    {"structure_class", K::structure, T::string, "streaming | reuse | reduction | irregular | multi_kernel"},
    // The task.
    {"task_atol", K::task, T::number, "the task's absolute tolerance"},
    {"task_rtol", K::task, T::number, "the task's relative tolerance"},
    {"task_dtype", K::task, T::string, "the task's main dtype (float32, float16, bfloat16, …)"},
    {"round", K::task, T::number, "the refinement round (0 for seeds)"},
};

}  // namespace

const std::vector<evidence_name>& evidence_names() { return table; }

const evidence_name* find_evidence_name(const std::string& name) {
  for (const auto& e : table) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> evidence_names_of(evidence_kind kind) {
  std::vector<std::string> out;
  for (const auto& e : table) {
    if (e.kind == kind) out.push_back(e.name);
  }
  return out;
}

const char* to_string(evidence_kind kind) {
  switch (kind) {
    case evidence_kind::metric:
      return "metric";
    case evidence_kind::feature:
      return "feature";
    case evidence_kind::structure:
      return "structure";
    case evidence_kind::task:
      return "task";
  }
  return "?";
}

const std::vector<std::string>& structure_classes() {
  static const std::vector<std::string> classes = {"streaming", "reuse", "reduction", "irregular", "multi_kernel"};
  return classes;
}

}  // namespace ks
