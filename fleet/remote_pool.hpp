#pragma once
// The daemon's pool for one device of a GPU node (a machine running
// `kernelskill-gpu --listen`, fleet/node_agent.hpp). Like a local pool
// (fleet/gpu_pool.hpp) it queues review requests and sends its device one at a time;
// the node's agent runs the worker, its watchdog and its restarts, and answers
// `crashed` and `timed_out` for the candidate that caused them. What is left to the
// daemon's side is the node itself:
//
// What it promises:
// - every request is answered: with the node's review_result, or with a node fault
//   (a caf::error, read_node_fault()) when the node could not judge it:
//     unavailable  the request was never sent: the node is not connected and could
//                  not be reached now (the caller may send it elsewhere at once);
//     lost         the request was sent and its node went away with it: the
//                  connection dropped (a node killed or restarted), the node did not
//                  answer a heartbeat within node_timeout_s while the review ran (a
//                  stopped or hung machine), or no answer came within the review's
//                  timeout plus review_margin_s;
//   a node fault is never the candidate's verdict (the dispatcher re-queues it);
// - while a review runs the node is asked to describe itself every heartbeat_s; the
//   agent answers that from its own state, so a kernel that hangs on the GPU does not
//   look like a hung node (the agent's watchdog answers `timed_out` for it);
// - the link is (re)opened only through fleet/node_link.hpp, on demand: when a review
//   or a describe arrives while it is down. Who asks decides how often (the
//   dispatcher probes with backoff); a down pool answers a describe with
//   driver_error saying why;
// - a node that comes back with another GPU at this ordinal (model or compute
//   capability) is not used: a task's timings are compared on one GPU model only.

#include <cstdint>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include "protocol/protocol.hpp"

namespace ks {

struct remote_pool_options {
  std::string host;
  uint16_t port = 0;
  std::string token;            // the node's shared secret (empty: none); see fleet/node_link.hpp
  int32_t device = 0;           // the ordinal on the node
  device_info expected;         // the device as first described; name empty: take what is there
  double review_margin_s = 60;  // the backstop: a review's timeout_s plus this (past the agent's own margin)
  double node_timeout_s = 20;   // a heartbeat's or a connection's answer; past it the node is taken as gone
  double heartbeat_s = 5;       // while a review runs
  size_t max_queue = 256;
  // A task's module larger than this reaches the node once, in parts of this size,
  // ahead of its reviews (protocol/module_parts.hpp). Tests lower it.
  uint64_t module_part_bytes = kModulePartBytes;
};

// "HOST:PORT/N": how metrics and logs name a node's device.
std::string remote_device_name(const remote_pool_options& o);

enum class node_fault : uint8_t { unavailable = 1, lost = 2 };

// The error a remote pool answers with when its node could not judge a review, and
// back from it (nullopt: not a node fault).
caf::error make_node_fault(node_fault kind, std::string message);
struct node_fault_info {
  node_fault kind;
  std::string message;
};
std::optional<node_fault_info> read_node_fault(const caf::error& e);

gpu_pool_actor spawn_remote_pool(caf::actor_system& sys, remote_pool_options opts);

}  // namespace ks
