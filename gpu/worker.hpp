#pragma once
// The actor behind a kernelskill-gpu process: answers `describe` with the worker's
// devices (or why it has none) and handles review requests for its device, each
// task's reference checked in a bounded child before any review runs it here
// (gpu/reference_check.hpp): a reference that loops forever or allocates without end
// gets an answer naming the limit, not a hung worker.

#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "base/bounded_child.hpp"
#include "gpu/profiler.hpp"
#include "protocol/protocol.hpp"

namespace ks {

class reference_launcher;

struct worker_options {
  int device = -1;                               // the ordinal this worker serves; -1 = describe all, review on 0
  uint64_t trial_cache_bytes = 0;                // reviewer_options::trial_cache_bytes; 0 = its default
  profile_replay replay = profile_replay::user;  // reviewer_options::replay
  // Each task's reference is first run in a child under these limits
  // (gpu/reference_check.hpp); one stopped there is never run in this process.
  process_limits reference_limits;
  // The modules sent in parts (protocol/module_parts.hpp) kept for later reviews, at
  // most this many bytes of them (always the last one used).
  uint64_t module_keep_bytes = uint64_t{16} << 30;
  // Where this process confines itself, what starts those children outside its sandbox
  // (gpu/reference_launcher.hpp); null: this process starts them.
  std::shared_ptr<reference_launcher> launcher;
};

// Builds the worker's self-description: host, pid, version, driver and devices.
// Never fails: a missing driver is reported in worker_info::driver_error.
worker_info describe_this_worker(const worker_options& opts);

gpu_worker_actor::behavior_type gpu_worker(gpu_worker_actor::pointer self, worker_options opts);

}  // namespace ks
