#pragma once
// The node agent: what `kernelskill-gpu --listen` runs on a GPU machine. It
// supervises one worker process per device (a gpu_pool each, fleet/gpu_pool.hpp) and
// publishes the node interface (protocol/protocol.hpp, gpu_node_actor) that daemons
// connect to.
//
// What it promises:
// - one worker per device, one review at a time on it; a worker that crashes, or a
//   review that hangs past its timeout plus the pool's margin, is answered `crashed`
//   or `timed_out` for that review alone, and the worker is restarted for the next;
// - describe answers at once from the agent's own record, also while reviews run:
//   the daemon's heartbeat (fleet/remote_pool.hpp) tells a live node with a busy GPU
//   from a stopped or unreachable one;
// - describe lists each device as its worker describes it (ordinal, model, compute
//   capability, memory); a device whose worker cannot start is left out and named in
//   the log (and in driver_error when no device is left);
// - a review for a device the node does not serve is answered internal_error naming
//   the devices it does serve;
// - a task's module larger than a part arrives ahead of its reviews in parts and is
//   kept by digest (protocol/module_parts.hpp); a review of a module it no longer holds
//   is answered module_not_held, and the daemon sends the parts again.

#include <cstdint>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "fleet/gpu_pool.hpp"
#include "protocol/protocol.hpp"

namespace ks {

struct node_agent_options {
  std::vector<int32_t> devices;  // the ordinals to serve, a worker each
  worker_info base;              // this machine: host, driver (devices are filled in from the workers)
  gpu_pool_options pool;         // how each worker is started and watched (device set per worker)
  // The modules daemons sent in parts (protocol/module_parts.hpp) kept for later
  // reviews, at most this many bytes of them (always the last one used).
  uint64_t module_keep_bytes = uint64_t{16} << 30;
};

// The agent and the pools it routes to (one per device, spawned detached: starting a
// worker blocks for as long as the process takes to come up).
struct pools_stopped;  // node_agent.cpp

struct node_agent_handle {
  gpu_node_actor agent;
  std::vector<gpu_pool_actor> pools;
  std::shared_ptr<pools_stopped> stopped;  // counts the pools that have stopped their worker
};
node_agent_handle spawn_node_agent(caf::actor_system& sys, node_agent_options opts);

// Ends the agent and its pools, and returns once every pool has stopped its worker
// (SIGTERM, then SIGKILL after 5 s; at most timeout_s in all): nothing the node started
// outlives it.
void stop_node_agent(const node_agent_handle& node, double timeout_s = 60);

}  // namespace ks
