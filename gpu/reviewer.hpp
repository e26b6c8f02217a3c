#pragma once
// The reviewer's GPU path: compiles a candidate, binds its launch plan to the task's
// shapes, runs it on the GPU next to the task's LibTorch reference, verifies it and
// times it (docs/reviewer.md). One reviewer owns one device for the life of the
// process; kernelskill-gpu's worker actor answers every review_request with it.
//
// What review() promises:
// - it never throws and always returns a review_result whose status says whose fault
//   a failure is (compile_error, plan_error, incorrect: the candidate's; crashed: the
//   CUDA context; internal_error: KernelSkill's or the task's), with a message a
//   person or an agent can act on;
// - "ok" means: compiled, and in every trial the outputs matched the reference within
//   the task's tolerance, two runs agreed bit for bit and the inputs were left
//   untouched; suspicious findings are listed in flags, never hidden;
// - after a CUDA error that poisons the context (an illegal address, a trap, …)
//   every later review answers `crashed` at once: the process must be restarted.
//
// Not thread-safe: one review at a time (the worker actor serialises them). This
// header is LibTorch-free.

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "gpu/profiler.hpp"
#include "gpu/timing.hpp"
#include "gpu/trial_inputs.hpp"
#include "model/device.hpp"
#include "model/review.hpp"
#include "model/task.hpp"

namespace ks {

struct reviewer_options {
  int device = 0;          // CUDA ordinal
  std::string arch;        // NVRTC target; empty = arch_for(the device)
  nvrtc_options compiler;  // its arch is replaced by `arch`
  timing_options timing;
  // Device memory the reviewer may keep for cached trial inputs and reference outputs
  // (all tasks together; gpu/trial_cache.hpp); 0 = half of the device's memory. Lowered
  // per trial to what the device has beside the review's working set.
  uint64_t trial_cache_bytes = 0;
  // How the CUPTI profile replays its passes (gpu/profiler.hpp): user replay runs the
  // plan once per pass; kernel replay has CUPTI save and restore device memory around
  // every kernel's replays, which at gigabytes of inputs costs tens of seconds.
  profile_replay replay = profile_replay::user;
  std::string node;  // names the machine in review_result::device; empty = host name
  // Time a launch-bound plan (plan/launch_bound.hpp) as one CUDA graph replay, as an
  // exported ModelNew runs it (gpu/graph_replay.hpp); false: plain launches always.
  bool cuda_graphs = true;
};

class reviewer {
 public:
  // Opens the driver, retains the device's primary context (the one LibTorch uses),
  // checks that LibTorch sees CUDA, and allocates the L2 flush buffer. Fails with the
  // reason when there is no usable GPU.
  static result<std::unique_ptr<reviewer>> create(reviewer_options opts = {});
  ~reviewer();
  reviewer(const reviewer&) = delete;
  reviewer& operator=(const reviewer&) = delete;

  review_result review(const review_request& request);

  // True once a CUDA error has poisoned the context; every review then answers
  // `crashed`.
  bool context_lost() const;
  const device_info& device() const;
  // The NVRTC target in use ("sm_90a").
  const std::string& arch() const;

  // The trial cache (gpu/trial_cache.hpp, docs/reviewer.md "Trial cache"): its budget,
  // the bytes it holds and how many trials.
  struct trial_cache_state {
    uint64_t budget_bytes = 0;
    uint64_t used_bytes = 0;
    size_t trials = 0;
    // The reference's runs in verification since the reviewer started: a trial whose
    // outputs the cache held ran none.
    uint64_t reference_runs = 0;
  };
  trial_cache_state trial_cache() const;
  // A new budget (0: the default, half of the device's memory); empties the cache.
  void set_trial_cache_bytes(uint64_t bytes);

 private:
  struct impl;
  explicit reviewer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// The NVRTC target for a compute capability: "sm_XY", with the architecture-specific
// suffix "a" from compute capability 9.0 on (sm_90a, sm_100a, sm_120a), which enables
// that chip's own instructions (wgmma, …). A cubin built so runs on that chip only —
// which is all a reviewer needs.
std::string arch_for(int cc_major, int cc_minor);

}  // namespace ks
