#pragma once
// The reviewer's inside (gpu/reviewer.hpp is the outside), shared by its two
// translation units: reviewer.cpp (the device, the tasks and their references, a
// plan's preparation and runs, a review's steps) and reviewer_trials.cpp (the
// trials that verify a candidate, its timing and profile). Only they include it.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <list>
#include <map>
#include <optional>
#include <set>

#include <ATen/Functions.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "base/content_hash.hpp"
#include "base/number_format.hpp"
#include "base/strings.hpp"
#include "gpu/cuda_driver.hpp"
#include "gpu/graph_replay.hpp"
#include "gpu/kernel_args.hpp"
#include "gpu/library_ops.hpp"
#include "gpu/output_check.hpp"
#include "gpu/profiler.hpp"
#include "gpu/result_adoption.hpp"
#include "gpu/reviewer.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "gpu/trial_cache.hpp"
#include "plan/launch_bound.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

namespace ks {

// What only the reviewer uses (it once had an anonymous namespace in reviewer.cpp).
namespace review_detail {

using clock_type = std::chrono::steady_clock;

// Thrown inside the reviewer to end a review with a status and a message; review()
// catches it. Never escapes the reviewer's files.
struct review_failure {
  review_status status;
  std::string message;
};

[[noreturn]] inline void fail(review_status s, std::string message) { throw review_failure{s, std::move(message)}; }

// Adds the wall time of its scope to one phase of `phases`, less the time that scopes
// inside it added to other phases meanwhile (the reference's runs inside verification
// count as reference, not twice). Ends with its scope, also when a review fails.
class phase_scope {
 public:
  phase_scope(review_phases& phases, double review_phases::*phase)
      : phases_(phases), phase_(phase), inner0_(phases.total_s()) {}
  ~phase_scope() {
    const double all = std::chrono::duration<double>(clock_type::now() - t0_).count();
    const double inner = phases_.total_s() - inner0_;
    phases_.*phase_ += std::max(0.0, all - inner);
  }
  phase_scope(const phase_scope&) = delete;
  phase_scope& operator=(const phase_scope&) = delete;

 private:
  review_phases& phases_;
  double review_phases::*phase_;
  double inner0_;
  clock_type::time_point t0_ = clock_type::now();
};

inline at::ScalarType scalar_type_of(const std::string& dtype) {
  if (auto t = scalar_type(dtype)) return *t;
  fail(review_status::plan_error, "unknown dtype '" + dtype + "'");
}

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

inline std::string shape_of(const at::Tensor& t) { return shape_to_string(t.sizes().vec()); }

// One task the reviewer has seen: its reference, ready to run. Its trials' inputs and
// reference outputs are in the trial cache, under `key`, which covers where they are
// drawn: device and CPU draws of a task are different values, so different entries.
struct task_entry {
  std::string key;
  task_spec task;  // at the requested size
  input_draw draw = input_draw::device;
  std::unique_ptr<reference_program> program;
  std::vector<at::Tensor> pristine_params;     // copies of the program's parameters
  std::vector<tensor_info> reference_outputs;  // learned from its first run
};

inline uint64_t bytes_of(const std::vector<at::Tensor>& ts) {
  uint64_t b = 0;
  for (auto& t : ts) b += static_cast<uint64_t>(t.numel()) * t.element_size();
  return b;
}

inline std::vector<int64_t> fingerprints(const std::vector<at::Tensor>& ts) {
  std::vector<int64_t> out;
  for (const auto& t : ts) out.push_back(bit_fingerprint(t));
  return out;
}

// One trial in the trial cache: its inputs as drawn (pristine: runs get copies) and,
// once the reference has run on them, the reference's outputs; with the fingerprints
// they had when stored, checked whenever they are used (a candidate that writes
// outside its own buffers could otherwise corrupt every later review of the task).
struct trial_data {
  std::vector<at::Tensor> inputs;
  std::vector<int64_t> input_prints;
  bool has_reference = false;
  std::vector<at::Tensor> reference;
  std::vector<int64_t> reference_prints;
  bool intact() const {
    return fingerprints(inputs) == input_prints && (!has_reference || fingerprints(reference) == reference_prints);
  }
};

// A candidate's plan, ready to launch: the resolved plan and its kernels' functions.
struct prepared_plan {
  resolved_plan plan;
  std::map<std::string, CUfunction> functions;
  bool launches_kernel = false;
  std::set<std::string> kernel_reads;  // tensors_read_by_kernels(plan)
  // Library steps by index, prepared on their first run (gpu/library_ops.hpp): the
  // dispatcher's operator and stack are built once per plan, not once per call.
  mutable std::map<size_t, prepared_library_op> library_ops;
};

struct module_guard {
  const cuda_driver* drv = nullptr;
  CUmodule module = nullptr;
  ~module_guard() {
    if (module) drv->cuModuleUnload(module);
  }
};

using tensor_env = std::map<std::string, at::Tensor>;

}  // namespace review_detail
using namespace review_detail;  // a private header: the reviewer's files alone

struct reviewer::impl {
  reviewer_options opts;
  const cuda_driver* drv = nullptr;
  device_info dev;
  CUdevice cu_device = 0;
  CUcontext context = nullptr;
  c10::Device torch_device{c10::kCUDA, 0};
  std::unique_ptr<nvrtc_compiler> compiler;
  std::string arch;
  device_limits limits;
  int64_t l2_bytes = 0;
  at::Tensor flush_buffer;
  uint32_t flush_value = 0;
  CUevent start_event = nullptr, end_event = nullptr;
  bool lost = false;
  std::string lost_reason;
  CUstream stream_ = nullptr;   // where launch() enqueues: a CUDA graph's capture stream while captured
  bool capturing = false;       // a failure then refuses the graph; no synchronising
  std::list<task_entry> tasks;  // most recently used first
  ks::trial_cache<trial_data> trials{0};
  uint64_t reference_runs = 0;           // in verification (trial_cache_state::reference_runs)
  uint64_t cache_cap = 0;                // what the trial cache may hold during this review
  bool bypass_cache = false;             // this review caches nothing (a retry after running out of memory)
  std::set<std::string> uncached_tasks;  // tasks (keys) whose reviews ran out of memory with trials cached
  trial_footprint footprint;             // of this review's task and plan (for messages)
  std::string node;
  std::unique_ptr<profiler> prof;
  sm_limits sm;

  ~impl() {
    prof.reset();
    tasks.clear();
    trials = ks::trial_cache<trial_data>(0);
    flush_buffer = at::Tensor();
    if (!lost) {
      if (start_event) drv->cuEventDestroy(start_event);
      if (end_event) drv->cuEventDestroy(end_event);
    }
    if (context) drv->cuDevicePrimaryCtxRelease(cu_device);
  }

  // --- CUDA errors ---

  // Ends the review as crashed when rc is an error; marks the context lost when the
  // error is sticky.
  void check_cu(CUresult rc, const std::string& what);

  void sync(const std::string& what);

  // After LibTorch threw: a crash when the context is broken, else `otherwise`.
  [[noreturn]] void after_torch_error(const std::string& where, const std::string& message, review_status otherwise);

  void make_current();

  // --- tasks and their inputs ---

  task_entry& task_for(const task_spec& task, input_draw draw);

  // Trial `trial`'s inputs: from the trial cache, or drawn now (and cached when they
  // fit). A cached trial whose data no longer matches its fingerprints (a candidate of
  // an earlier review wrote outside its buffers after its checks, while timed or
  // profiled) is dropped and drawn again.
  std::vector<at::Tensor> inputs_for(task_entry& e, uint32_t trial);

  // The reference's outputs of trial `trial`, whose inputs are `originals`: from the
  // trial cache, or run now on copies of them (and cached beside them when they fit).
  // Called after the candidate's runs: cached data that changed meanwhile was changed by
  // the candidate, which is then a problem of this trial (and the data is dropped).
  std::vector<at::Tensor> reference_for(task_entry& e, uint32_t trial, const std::vector<at::Tensor>& originals,
                                        const std::string& label, std::vector<std::string>& problems);

  std::vector<at::Tensor> clones(const std::vector<at::Tensor>& ts);

  // The candidate's own copies of the inputs and parameters, by name.
  tensor_env candidate_env(const task_entry& e, const std::vector<at::Tensor>& inputs);

  // What one trial of this task and plan takes; an error naming the sizes when it does
  // not fit the device at all; then the trial cache's cap for this review, and the
  // cache trimmed to it (other tasks' trials first).
  void make_room(const task_entry& e, const prepared_plan& pp);

  // "inputs 6.40 GB, outputs …": for an out-of-memory message.
  std::string memory_note() const;

  // --- the plan ---

  prepared_plan prepare(resolved_plan plan, const std::string& cubin, module_guard& mod, review_result& r);

  void launch(const prepared_plan& pp, const resolved_step& s, tensor_env& env);

  void library(const prepared_plan& pp, const resolved_step& s, tensor_env& env);

  // Runs the plan once on `env` (the candidate's inputs and parameters): allocates its
  // buffers (zero-filled for init: zeros; otherwise poisoned with `pattern` 0 or 1, or
  // left as allocated for -1, as in timed runs), runs the steps, returns the outputs.
  std::vector<at::Tensor> run_plan(const prepared_plan& pp, tensor_env env, int pattern);

  std::vector<at::Tensor> run_reference(task_entry& e, const std::vector<at::Tensor>& inputs, const std::string& where);

  // --- verification ---

  // Problems with the candidate's copies of the inputs and parameters after a run.
  void check_unchanged(const task_entry& e, const tensor_env& env, const std::vector<at::Tensor>& originals,
                       const std::string& when, std::vector<std::string>& problems);

  std::string trial_label(const task_entry& e, uint32_t trial);

  void verify(const review_request& req, task_entry& e, const prepared_plan& pp, review_result& r,
              clock_type::time_point deadline);
  std::string independence_note;

  static void add_flag(review_result& r, const std::string& flag);

  // The plan's outputs against the reference's: count, shapes and dtypes. Learned on
  // the task's first run; later reviews check them in the validator already.
  void check_shapes(task_entry& e, const prepared_plan& pp, const std::vector<at::Tensor>& ref);

  static bool inputs_differ(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

  static bool outputs_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

  // Whether `v`, an element of `t`, is the poison `pattern` wrote (NaN for pattern 0).
  static bool holds_poison(const at::Tensor& t, double v, int pattern);

  std::string mismatch_message(const std::string& name, const at::Tensor& got, const at::Tensor& second,
                               int second_poison, const output_comparison& c, const tolerance_spec& tol);

  // --- timing ---

  double timed_once(const std::function<void()>& run);

  void time_both(const review_request& req, task_entry& e, const prepared_plan& pp, review_result& r,
                 clock_type::time_point deadline);
  std::string timing_note;

  // The plan as one CUDA graph when it is launch-bound (plan/launch_bound.hpp), checked
  // against the reference on trial 0's inputs as plain launches were; else null: plain
  // launches, and graph_note says why when a capture was tried (docs/reviewer.md).
  std::unique_ptr<plan_graph> graph_for(task_entry& e, const prepared_plan& pp, tensor_env& env,
                                        const std::vector<at::Tensor>& originals,
                                        const std::vector<at::Tensor>& buffers, review_result& r);
  std::string graph_note;

  // A speedup above review.suspicious_speedup is checked again instead of believed or
  // refused (a correct kernel can be that fast: KernelBench's 40_LayerNorm at its
  // published size runs 29.7x faster than eager): one more run, after the timed ones,
  // in the buffers they used, on the inputs of a trial verification did not draw,
  // written into those buffers in place, with the outputs poisoned first. A kernel that
  // does its work only while it is being verified (counts its calls, keys on its input
  // buffers) leaves stale or poisoned outputs and is incorrect; one that passes keeps
  // its speedup and the flag speedup_rechecked says it was looked at twice.
  void recheck_speedup(const review_request& req, task_entry& e, const prepared_plan& pp, tensor_env& env,
                       review_result& r);
  std::string recheck_note;

  // --- profile ---

  // Occupancy and resources of the plan's longest-running kernel of its own (the
  // first kernel step when nothing was traced), from the compiled kernel and the
  // device's limits: no CUPTI needed.
  void add_occupancy(const prepared_plan& pp, const review_result& r, const std::vector<kernel_sample>& kernels,
                     std::map<std::string, double>& values);

  // One more run of the plan, traced, and one under CUPTI's range profiler, on trial
  // 0's inputs. A profiler failure is logged and leaves the metrics out: the review
  // stays what verification and timing made it.
  void profile_plan(task_entry& e, const prepared_plan& pp, review_result& r);
  std::string profile_note;

  // --- one review ---

  void review_body(const review_request& req, review_result& r, clock_type::time_point deadline);

  review_phases phases;  // of the review in progress

  // A result naming the request, the candidate and this device, nothing judged yet.
  review_result blank_result(const review_request& req) const;

  review_result review(const review_request& req);

  void attempt(const review_request& req, review_result& r, clock_type::time_point deadline);
};

}  // namespace ks
