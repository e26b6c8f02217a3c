#pragma once
// The actor behind a kernelskill-gpu process: answers `describe` with the worker's
// devices (or why it has none) and handles review requests for its device.

#include <cstdint>

#include <caf/fwd.hpp>

#include "gpu/profiler.hpp"
#include "protocol/protocol.hpp"

namespace ks {

struct worker_options {
  int device = -1;  // the ordinal this worker serves; -1 = describe all, review on 0
  uint64_t trial_cache_bytes = 0;  // reviewer_options::trial_cache_bytes; 0 = its default
  profile_replay replay = profile_replay::user;  // reviewer_options::replay
};

// Builds the worker's self-description: host, pid, version, driver and devices.
// Never fails: a missing driver is reported in worker_info::driver_error.
worker_info describe_this_worker(const worker_options& opts);

gpu_worker_actor::behavior_type gpu_worker(gpu_worker_actor::pointer self,
                                           worker_options opts);

}  // namespace ks
