#pragma once
// The gpu pool actor: the daemon's front for one GPU. It owns a local kernelskill-gpu
// process, queues review requests and hands them to the worker one at a time (so
// reviews never share a device), and keeps the worker alive:
// - a worker that dies (a crash, a kill, a lost connection) is noticed through CAF's
//   down message; the request it was serving is answered `crashed`;
// - a review that outlives its timeout (plus review_margin_s) is answered `timed_out`:
//   a watchdog thread kills the worker (a hung kernel can only be stopped with its
//   process), and the death reaches the pool like any other;
// - a worker that dies says how in the answer (the exit status or signal, e.g. "was
//   killed by signal 6 (Aborted)");
// - after a `crashed` review the CUDA context may be poisoned, so the worker is
//   replaced as well;
// - a replaced worker is started again and the queue goes on; restarts that keep
//   failing are bounded, and then queued requests are answered with the reason.

#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "protocol/protocol.hpp"
#include "fleet/worker_process.hpp"

namespace ks {

struct gpu_pool_options {
  worker_process_options worker;     // how to start the worker (binary, device, …)
  double review_margin_s = 30;       // added to a request's own timeout_s
  size_t max_queue = 256;            // more pending reviews are refused at once
  int max_consecutive_restart_failures = 3;
  // Called on the pool's thread once it has ended and stopped its worker: the node
  // agent waits for every pool's before its process leaves (its workers must not
  // outlive it). May be empty.
  std::function<void()> on_stopped;
};

// Spawn with caf::detached: starting a worker blocks for as long as the process takes
// to come up, which must not hold a scheduler thread.
gpu_pool_actor::behavior_type gpu_pool(gpu_pool_actor::pointer self, gpu_pool_options opts);

}  // namespace ks
