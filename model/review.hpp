#pragma once
// Reviews: compile, verify, time and profile one candidate against its task. The
// request a reviewer takes and the result it gives back.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/candidate.hpp"
#include "model/fields.hpp"
#include "model/task.hpp"

namespace ks {

// How a review ended. On the wire it travels as its integer, in JSON by its
// to_string() name: only append new enumerators.
enum class review_status : uint8_t {
  ok = 0,              // compiled, correct in every trial, timed
  compile_error = 1,   // NVRTC rejected the source (see diagnostics)
  plan_error = 2,      // the launch plan does not fit the source or the shapes
  incorrect = 3,       // ran, but an output differs from the reference
  crashed = 4,         // the worker died or the CUDA context was lost
  timed_out = 5,       // killed after the review timeout
  internal_error = 6,  // KernelSkill's own failure (not the candidate's fault)
};
const char* to_string(review_status s);

struct review_options {
  uint32_t trials = 5;
  bool profile = true;
  bool time = true;
  double timeout_s = 60.0;
  double suspicious_speedup = 20.0;  // speedups above this are checked again (docs/reviewer.md "Flags")
  std::string size;                  // named size from task_spec::sizes, or empty
  // Where the trials' inputs (and random parameters) are drawn: "device" (on the GPU
  // that reviews, from a seeded Philox generator: the same values on every run on the
  // same GPU model and PyTorch build) or "cpu" (on the CPU and copied: the same values
  // on every machine, 10 s and more per trial at KernelBench's sizes). The config's
  // review.draw_inputs (docs/reviewer.md, "Where inputs are drawn").
  std::string draw_inputs = "device";
  friend bool operator==(const review_options&, const review_options&) = default;
};
template <class F>
auto visit_fields(review_options& x, F&& f) {
  return f("review_options", KS_FIELD(trials), KS_FIELD(profile), KS_FIELD(time), KS_FIELD(timeout_s),
           KS_FIELD(suspicious_speedup), KS_FIELD(size), KS_FIELD(draw_inputs));
}

struct review_request {
  uint64_t request_id = 0;
  task_spec task;
  candidate cand;
  review_options options;
  friend bool operator==(const review_request&, const review_request&) = default;
};
template <class F>
auto visit_fields(review_request& x, F&& f) {
  return f("review_request", KS_FIELD(request_id), KS_FIELD(task), KS_FIELD(cand), KS_FIELD(options));
}

// One compiler message, positioned in the candidate's source.
struct compile_diagnostic {
  int32_t line = 0;
  int32_t column = 0;
  std::string severity;  // "error", "warning"
  std::string message;
  friend bool operator==(const compile_diagnostic&, const compile_diagnostic&) = default;
};
template <class F>
auto visit_fields(compile_diagnostic& x, F&& f) {
  return f("compile_diagnostic", KS_FIELD(line), KS_FIELD(column), KS_FIELD(severity), KS_FIELD(message));
}

// Resource use of one compiled kernel, as the compiler reports it.
struct kernel_resources {
  std::string kernel;
  int32_t registers = 0;
  int32_t static_shared_bytes = 0;
  int32_t local_bytes = 0;  // per thread; > 0 means spills or local arrays
  int32_t max_threads_per_block = 0;
  friend bool operator==(const kernel_resources&, const kernel_resources&) = default;
};
template <class F>
auto visit_fields(kernel_resources& x, F&& f) {
  return f("kernel_resources", KS_FIELD(kernel), KS_FIELD(registers), KS_FIELD(static_shared_bytes),
           KS_FIELD(local_bytes), KS_FIELD(max_threads_per_block));
}

struct timing_stats {
  double median_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0, stddev_ms = 0;
  uint32_t repetitions = 0;
  friend bool operator==(const timing_stats&, const timing_stats&) = default;
};
template <class F>
auto visit_fields(timing_stats& x, F&& f) {
  return f("timing_stats", KS_FIELD(median_ms), KS_FIELD(mean_ms), KS_FIELD(min_ms), KS_FIELD(max_ms),
           KS_FIELD(stddev_ms), KS_FIELD(repetitions));
}

// Hardware metrics of a candidate's run. Names are stable (the decision policy reads
// them): dram_throughput_pct, l2_throughput_pct, l1_throughput_pct,
// sm_throughput_pct, achieved_occupancy_pct, branch_efficiency_pct,
// eligible_warps_per_cycle, stall_long_scoreboard_pct, … (see docs/metrics.md).
struct profile_metrics {
  std::map<std::string, double> values;
  uint32_t kernel_launches = 0;
  double duration_ms = 0;
  friend bool operator==(const profile_metrics&, const profile_metrics&) = default;
};
template <class F>
auto visit_fields(profile_metrics& x, F&& f) {
  return f("profile_metrics", KS_FIELD(values), KS_FIELD(kernel_launches), KS_FIELD(duration_ms));
}

// Where a review's wall-clock time went, in seconds (std::chrono::steady_clock in the
// worker, around each phase; docs/reviewer.md, "Phase times"). A phase the review did
// not reach stays 0, so a compile error shows only compile_s.
struct review_phases {
  double compile_s = 0;    // NVRTC (or its cache), resolving the plan, loading the module
  double inputs_s = 0;     // drawing the trials' inputs or taking them from the cache
  double reference_s = 0;  // loading the task's reference and running it in verification
  double verify_s = 0;     // the candidate's runs in verification and the output checks
  double timing_s = 0;     // the timed runs, candidate and reference alternately
  double profile_s = 0;    // the CUPTI trace and hardware metrics
  double total_s() const { return compile_s + inputs_s + reference_s + verify_s + timing_s + profile_s; }
  review_phases& operator+=(const review_phases& o) {
    compile_s += o.compile_s;
    inputs_s += o.inputs_s;
    reference_s += o.reference_s;
    verify_s += o.verify_s;
    timing_s += o.timing_s;
    profile_s += o.profile_s;
    return *this;
  }
  friend bool operator==(const review_phases&, const review_phases&) = default;
};
template <class F>
auto visit_fields(review_phases& x, F&& f) {
  return f("review_phases", KS_FIELD(compile_s), KS_FIELD(inputs_s), KS_FIELD(reference_s), KS_FIELD(verify_s),
           KS_FIELD(timing_s), KS_FIELD(profile_s));
}

// "compile 0.12 s, inputs 0.00 s, reference 0.03 s, verify 0.15 s, timing 0.08 s,
// profile 1.60 s": how trajectories, reports and summaries print it.
std::string describe_phases(const review_phases& p);

struct review_result {
  uint64_t request_id = 0;
  std::string candidate_id;
  review_status status = review_status::internal_error;
  std::string message;  // one-paragraph summary for people and agents
  std::vector<compile_diagnostic> diagnostics;
  std::string compile_log;
  uint32_t trials_run = 0;
  uint32_t trials_passed = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  timing_stats candidate_time;
  timing_stats reference_time;
  double speedup = 0;  // reference median / candidate median
  profile_metrics profile;
  std::vector<kernel_resources> resources;
  std::vector<std::string> flags;  // suspicious findings, e.g. "no_custom_kernel"
  std::string device;              // "node/ordinal: name"
  review_phases phases;            // where the review's time went
  friend bool operator==(const review_result&, const review_result&) = default;
};
template <class F>
auto visit_fields(review_result& x, F&& f) {
  return f("review_result", KS_FIELD(request_id), KS_FIELD(candidate_id), KS_FIELD(status), KS_FIELD(message),
           KS_FIELD(diagnostics), KS_FIELD(compile_log), KS_FIELD(trials_run), KS_FIELD(trials_passed),
           KS_FIELD(max_abs_error), KS_FIELD(max_rel_error), KS_FIELD(candidate_time), KS_FIELD(reference_time),
           KS_FIELD(speedup), KS_FIELD(profile), KS_FIELD(resources), KS_FIELD(flags), KS_FIELD(device),
           KS_FIELD(phases));
}

}  // namespace ks
