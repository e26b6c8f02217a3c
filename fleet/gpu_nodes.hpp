#pragma once
// Finding the GPUs an experiment or the daemon can use: local kernelskill-gpu processes
// started on loopback, and remote nodes (`kernelskill-gpu --listen`, node agents)
// named in the config, each asked to describe itself over CAF (remote ones through
// fleet/node_link.hpp). Nodes that cannot be reached or have no GPU are reported, not
// silently dropped; the unreachable ones are listed for the dispatcher to try again.

#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "config/experiment_config.hpp"
#include "fleet/worker_process.hpp"
#include "protocol/protocol.hpp"

namespace ks {

struct gpu_node {
  std::string name;  // "local" or "HOST:PORT"
  worker_info info;
  gpu_worker_actor handle;                  // local: the worker that described the devices
  std::unique_ptr<worker_process> process;  // local: the node owns that worker
  remote_worker remote;                     // remote: where the node agent listens (port 0 for local)
  bool is_remote() const { return remote.port != 0; }
};

struct gpu_discovery {
  std::vector<gpu_node> nodes;             // reachable nodes with at least one device
  std::vector<std::string> problems;       // one line per node that failed or has no GPU
  std::vector<remote_worker> unreachable;  // remote nodes that did not answer (tried again later)
  std::string remote_token;                // the secret remote nodes are reached with (reconnections too)
  size_t device_count() const;
};

// Starts the local worker (unless gpus.local is none) and connects to every remote one.
gpu_discovery discover_gpus(caf::actor_system& sys, const gpu_config& cfg, double timeout_s = 30);

// The message for a run that found no GPU: what was tried and how to point
// KernelSkill at one.
std::string no_gpu_message(const gpu_discovery& found);

}  // namespace ks
