#pragma once
// The gpu pool actor: the daemon's front for one GPU. It owns a local kernelskill-gpu
// process, queues review requests and hands them to the worker one at a time (so
// reviews never share a device), and keeps the worker alive:
// - a worker that dies (a crash, a kill, a lost connection) is noticed through CAF's
//   down message; what the review it was serving gets depends on how it died:
//   - died of itself (an abort, a segfault, an error status: the review may have
//     caused it): `crashed`, saying how (the exit status or signal, e.g. "was
//     killed by signal 6 (Aborted)");
//   - ended from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP: an operator, the OOM
//     killer; or status 0: it was asked to stop), or its connection dropped while
//     the process lived: not the candidate's doing, so the review runs again on a
//     fresh worker, ahead of the queue, at most max_lost times; then it is answered
//     internal_error naming each loss (unjudged: the seed line never counts it
//     against the candidate);
// - a review that outlives its timeout (plus review_margin_s) is answered `timed_out`:
//   a watchdog thread kills the worker (a hung kernel can only be stopped with its
//   process), and the death reaches the pool like any other;
// - a worker that stops answering without closing its link — stopped (SIGSTOP,
//   SIGTSTP) for stopped_limit_s, busy or idle, or stopped when its review's time is
//   up — is killed by the watchdog and replaced; its review runs again as above (a
//   kernel that hangs leaves its process running, never stopped);
// - after a `crashed` review the CUDA context may be poisoned, so the worker is
//   replaced as well;
// - a replaced worker is started again and the queue goes on; restarts that keep
//   failing are bounded, and then queued requests are answered with the reason.

#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "fleet/worker_process.hpp"
#include "protocol/protocol.hpp"

namespace ks {

struct gpu_pool_options {
  worker_process_options worker;  // how to start the worker (binary, device, …)
  double review_margin_s = 30;    // added to a request's own timeout_s
  size_t max_queue = 256;         // more pending reviews are refused at once
  int max_consecutive_restart_failures = 3;
  // A review whose worker is lost this often (not by the review's doing) is answered
  // internal_error instead of being run again.
  int max_lost = 3;
  // A worker stopped (SIGSTOP) this long is killed and replaced.
  double stopped_limit_s = 5;
  // A task's module larger than this reaches the worker once, in parts of this size,
  // ahead of its reviews (protocol/module_parts.hpp): no message carries more (CAF's
  // limit is 4 GiB), and the worker keeps it for the task's next reviews. Tests lower it.
  uint64_t module_part_bytes = kModulePartBytes;
  // Called on the pool's thread once it has ended and stopped its worker: the node
  // agent waits for every pool's before its process leaves (its workers must not
  // outlive it). May be empty.
  std::function<void()> on_stopped;
};

// Spawn with caf::detached: starting a worker blocks for as long as the process takes
// to come up, which must not hold a scheduler thread.
gpu_pool_actor::behavior_type gpu_pool(gpu_pool_actor::pointer self, gpu_pool_options opts);

}  // namespace ks
