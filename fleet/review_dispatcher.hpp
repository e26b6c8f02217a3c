#pragma once
// The front of every GPU pool, local and remote: the reviewer the seed lines ask. It
// sends each review to one device and answers with that device's verdict.
//
// What it promises:
// - a task is reviewed on one GPU model only: its first review picks a device class
//   (model and compute capability: device_class()) among the devices in the rotation,
//   the one with the least work per device, and every later review of the task goes
//   to a device of that class, so its speedups are compared like with like;
// - within the class, the device with the fewest reviews in flight gets it (each
//   pool reviews one at a time and queues the rest);
// - a pool that answers with a node fault (fleet/remote_pool.hpp) leaves the
//   rotation at once (its failures come back fast, and would otherwise make it look
//   idle); the review is sent to another device of its class. A review lost with its
//   node (sent, then the node went away) is re-queued too, never answered as the
//   candidate's failure; one lost max_lost times is answered internal_error (the
//   candidate may be what takes nodes down), which the seed line does not count
//   against the candidate or its method;
// - a pool out of the rotation is asked to describe itself (which reopens its node's
//   link) after probe_min_s, then after twice as long each time it fails, up to
//   probe_max_s; when it answers with its device it is back in the rotation;
// - remote nodes that could not be reached at start (late_nodes) are tried the same
//   way; when one answers, a pool per device joins the rotation;
// - a review with no device of its class in the rotation waits for one, at most
//   hold_limit_s; then it is answered internal_error naming the class and why its
//   devices are out;
// - every answer and every loss is metered per pool (review_meter);
// - the dispatcher owns its pools (unless own_pools is false): they end with it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "fleet/remote_pool.hpp"
#include "fleet/review_meter.hpp"
#include "protocol/protocol.hpp"

namespace ks {

// "NVIDIA H200 (sm_90)": the GPU model a task's timings belong to.
std::string device_class(const device_info& d);

struct dispatch_pool {
  gpu_pool_actor handle;
  std::string name;          // "local/0", "HOST:PORT/1" (the meter's name)
  std::string device_class;  // empty: unknown (one class for all such pools)
};

struct late_node {
  std::string host;
  uint16_t port = 0;
};

struct dispatcher_options {
  std::vector<dispatch_pool> pools;
  std::vector<late_node> late_nodes;
  remote_pool_options remote;           // for the pools of late nodes (host, port, device set per device)
  std::shared_ptr<review_meter> meter;  // one name per pool, in order; may be null
  int max_lost = 3;
  double probe_min_s = 0.5;
  double probe_max_s = 30;
  double hold_limit_s = 600;
  bool own_pools = true;
};

reviewer_actor spawn_review_dispatcher(caf::actor_system& sys, dispatcher_options opts);

}  // namespace ks
