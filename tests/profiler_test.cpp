// The profiler's arithmetic, without a GPU: how kernels of a plan combine into the
// plan's metrics, and the occupancy limits of a launch. The CUPTI half runs in
// reviewer_test's GPU tests.

#include <catch2/catch.hpp>

#include <cmath>

#include "gpu/profiler.hpp"
#include "policy/evidence_names.hpp"

using namespace ks;

namespace {

// H100 / H200 (compute capability 9.0), 132 SMs.
sm_limits hopper() {
  sm_limits sm;
  sm.max_threads_per_sm = 2048;
  sm.max_blocks_per_sm = 32;
  sm.registers_per_sm = 65536;
  sm.shared_bytes_per_sm = 233472;
  sm.reserved_shared_bytes_per_block = 1024;
  sm.multiprocessors = 132;
  return sm;
}

}  // namespace

TEST_CASE("every metric the profiler fills is a name the decision policy knows", "[profiler]") {
  for (const auto& m : profiled_metrics()) {
    if (!*m.name) continue;
    INFO(m.name);
    const evidence_name* e = find_evidence_name(m.name);
    REQUIRE(e != nullptr);
    CHECK(e->kind == evidence_kind::metric);
  }
  kernel_sample k{"k", 2.0, {}};
  for (const auto& m : profiled_metrics()) k.values[m.cupti] = 1;
  for (const auto& [name, v] : combine_kernel_samples({k})) {
    INFO(name);
    CHECK(find_evidence_name(name) != nullptr);
  }
  // And the occupancy values the reviewer adds.
  for (const char* name : {"theoretical_occupancy_pct", "occupancy_limit_registers", "occupancy_limit_shared_mem",
                           "occupancy_limit_warps", "occupancy_limit_blocks", "waves_per_sm", "registers_per_thread",
                           "shared_mem_per_block", "local_bytes_per_thread"})
    CHECK(find_evidence_name(name) != nullptr);
}

TEST_CASE("kernels combine: rates weighted by duration, counts added", "[profiler]") {
  kernel_sample a{"a",
                  1.0,
                  {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 20},
                   {"dram__bytes.sum", 1000},
                   {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 10},
                   {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 5}}};
  kernel_sample b{"b",
                  3.0,
                  {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 60},
                   {"dram__bytes.sum", 500},
                   {"smsp__sass_average_branch_targets_threads_uniform.pct", NAN}}};
  auto v = combine_kernel_samples({a, b});
  CHECK(v.at("dram_throughput_pct") == Approx(50));  // (20·1 + 60·3) / 4
  CHECK(v.at("dram_bytes") == Approx(1500));
  CHECK(v.at("flops") == Approx(25));  // 2·10 + 5
  CHECK(v.at("kernel_launches") == 2);
  CHECK(v.at("duration_us") == Approx(4));
  // Never collected, or not a number: absent, not 0.
  CHECK(v.count("l2_throughput_pct") == 0);
  CHECK(v.count("branch_efficiency_pct") == 0);
  CHECK(combine_kernel_samples({}).empty());
}

TEST_CASE("a kernel that executes no branch has no branch efficiency", "[profiler]") {
  // CUPTI evaluates 0 branch targets as 0% uniform, which would read as fully divergent.
  kernel_sample straight{
      "straight",
      5.0,
      {{"smsp__sass_average_branch_targets_threads_uniform.pct", 0}, {"smsp__sass_branch_targets.sum", 0}}};
  kernel_sample branchy{
      "branchy",
      1.0,
      {{"smsp__sass_average_branch_targets_threads_uniform.pct", 90}, {"smsp__sass_branch_targets.sum", 4096}}};
  CHECK(combine_kernel_samples({straight}).count("branch_efficiency_pct") == 0);
  CHECK(combine_kernel_samples({straight, branchy}).at("branch_efficiency_pct") == Approx(90));
}

TEST_CASE("a weighted metric only one kernel has is that kernel's value", "[profiler]") {
  kernel_sample a{"a", 1.0, {{"sm__warps_active.avg.pct_of_peak_sustained_active", 80}}};
  kernel_sample b{"b", 9.0, {}};
  CHECK(combine_kernel_samples({a, b}).at("achieved_occupancy_pct") == Approx(80));
}

TEST_CASE("occupancy limits follow the occupancy calculator", "[profiler]") {
  SECTION("256 threads, 32 registers: full occupancy") {
    auto o = estimate_occupancy(hopper(), {256, 32, 0, 1000});
    CHECK(o.limit_registers == 8);
    CHECK(o.limit_warps == 8);
    CHECK(o.limit_blocks == 32);
    CHECK(o.limit_shared_mem == 32);
    CHECK(o.blocks_per_sm == 8);
    CHECK(o.theoretical_pct == Approx(100));
  }
  SECTION("1024 threads, 64 registers: registers allow one block") {
    auto o = estimate_occupancy(hopper(), {1024, 64, 0, 132});
    CHECK(o.limit_registers == 1);
    CHECK(o.limit_warps == 2);
    CHECK(o.theoretical_pct == Approx(50));
    CHECK(o.waves_per_sm == Approx(1));
  }
  SECTION("128 threads, 40 registers, 48 KiB shared memory: shared memory limits") {
    auto o = estimate_occupancy(hopper(), {128, 40, 48 * 1024, 1000});
    CHECK(o.limit_registers == 12);  // 1280 registers a warp; 12 warps in each of 4 partitions
    CHECK(o.limit_shared_mem == 4);  // 228 KiB / (48 + 1) KiB
    CHECK(o.limit_warps == 16);
    CHECK(o.blocks_per_sm == 4);
    CHECK(o.theoretical_pct == Approx(25));
    CHECK(o.waves_per_sm == Approx(1000.0 / (132 * 4)));
  }
  SECTION("no threads: nothing to estimate") {
    auto o = estimate_occupancy(hopper(), {0, 32, 0, 1});
    CHECK(o.blocks_per_sm == 0);
    CHECK(o.theoretical_pct == 0);
  }
}
