#pragma once
// The reviewer's profiler: what the hardware did during one run of a candidate's plan,
// as the named metrics the decision policy reads (docs/metrics.md). It runs in the
// worker, after verification and timing, through CUPTI:
// - the activity API traces one run of the plan: how many kernels it launched, their
//   names and their durations;
// - the range profiler (CUDA 13's cupti_range_profiler.h) collects Nsight Compute's
//   metrics for every kernel of a second run, each kernel replayed by CUPTI as many
//   times as the metrics need (auto range). Two replay modes (profile_replay):
//   - user (the default): the plan is run whole once per pass; every run allocates and
//     initialises its own outputs and scratch, and never writes its inputs (the
//     reviewer checks that), so each pass sees the state the first one saw. Cost:
//     passes × one run of the plan;
//   - kernel: the plan runs once and CUPTI saves and restores device memory around
//     every replay of every kernel. At KernelBench's sizes, with gigabytes of cached
//     trials on the device, that cost 82 of a 92 s review (docs/reviewer.md).
//
// What it promises:
// - a metric that cannot be collected (unknown on this chip, not supported by this
//   CUPTI) is absent from the result, never 0, and the reason is logged once;
// - any profiler failure is an error value with CUPTI's own message; the caller logs
//   it and keeps the review (profiling never turns a correct review into a failure);
// - the plan-level numbers combine the kernels as docs/metrics.md says:
//   percentages and rates are duration-weighted means, counts and bytes add up.
//
// The occupancy half (limits by registers, shared memory, warps and blocks) is
// computed from the kernel's resources and the device's limits, as Nsight Compute's
// launch statistics are; it needs no CUPTI and is a pure function (tested on the CPU).
//
// Not thread-safe: one profile at a time per process (CUPTI's activity callbacks are
// process-wide). This header is LibTorch-free.

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

// How kernels of a plan combine into one number.
enum class metric_combine {
  weighted,  // duration-weighted mean (percentages, rates, per-cycle values)
  sum,       // adds up over kernels (bytes, instruction counts)
};

// One CUPTI metric the profiler collects, and the stable name it fills (empty for a
// metric that only feeds a derived value, such as the operation counts of `flops`).
struct profiled_metric {
  const char* name;   // "dram_throughput_pct", or "" (used by a derived value)
  const char* cupti;  // "dram__throughput.avg.pct_of_peak_sustained_elapsed"
  metric_combine combine;
};

// Every metric the range profiler asks for, in a fixed order.
const std::vector<profiled_metric>& profiled_metrics();

// One kernel of the profiled run.
struct kernel_sample {
  std::string name;
  double duration_us = 0;                // from the activity trace
  std::map<std::string, double> values;  // by CUPTI metric name; missing = not collected
};

// The plan-level values (docs/metrics.md names) from its kernels: weighted metrics
// by duration, summed ones added; `flops` from the floating-point instruction
// counts (fma counts twice); `duration_us` and `kernel_launches` from the samples.
// A metric no kernel has stays absent.
std::map<std::string, double> combine_kernel_samples(const std::vector<kernel_sample>& kernels);

// The device's per-SM limits that bound occupancy.
struct sm_limits {
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int registers_per_sm = 65536;
  int shared_bytes_per_sm = 233472;  // the largest shared-memory carve-out
  int reserved_shared_bytes_per_block = 1024;
  int multiprocessors = 1;
  int warp_size = 32;
  int register_allocation_unit = 256;   // registers, allocated per warp
  int warp_allocation_granularity = 4;  // warps share registers in groups of four
};

// One kernel launch's shape and resources.
struct kernel_launch_shape {
  int64_t threads_per_block = 0;
  int registers_per_thread = 0;
  int64_t shared_bytes_per_block = 0;  // static + dynamic
  int64_t blocks = 0;                  // grid size
};

// Blocks per SM each resource allows, the resulting theoretical occupancy and waves.
struct occupancy_estimate {
  int limit_registers = 0;
  int limit_shared_mem = 0;
  int limit_warps = 0;
  int limit_blocks = 0;
  int blocks_per_sm = 0;       // the smallest limit
  double theoretical_pct = 0;  // blocks_per_sm × warps per block / max warps per SM
  double waves_per_sm = 0;     // blocks / (SMs × blocks_per_sm)
};

occupancy_estimate estimate_occupancy(const sm_limits& sm, const kernel_launch_shape& k);

// What profile() saw: every kernel of the profiled run with its metrics, and the
// launch count and total kernel time of the traced run.
struct profiled_run {
  std::vector<kernel_sample> kernels;
  uint32_t launches = 0;
  double duration_us = 0;
};

// How the range profiler's passes are replayed (see the top of this file).
enum class profile_replay { user, kernel };
const char* to_string(profile_replay r);

// The CUPTI half. Made once per reviewer; CUPTI itself is set up on the first
// profile() (its host object, the metrics this chip has, the configuration image).
class profiler {
 public:
  // Only records the context and device; never fails on a machine without CUPTI
  // support (that shows on the first profile()).
  static std::unique_ptr<profiler> create(CUcontext context, int device_ordinal,
                                          profile_replay replay = profile_replay::user);
  ~profiler();
  profiler(const profiler&) = delete;
  profiler& operator=(const profiler&) = delete;

  // Runs `run_once` once traced, then under the range profiler: once (kernel replay)
  // or once per pass (user replay). `run_once` launches the plan once and waits for
  // it, returning an error if that failed; under user replay it must launch the same
  // kernels each time from the same state.
  // The kernels are in launch order.
  result<profiled_run> profile(const std::function<status()>& run_once);

  // Metrics this chip or CUPTI could not collect, with the reason ("" until the first
  // profile()).
  const std::vector<std::string>& unavailable() const;

  // Replay passes one profile takes (0 until the first profile()).
  size_t passes() const;

 private:
  struct impl;
  explicit profiler(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ks
