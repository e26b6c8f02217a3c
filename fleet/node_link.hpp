#pragma once
// Opening a link from the daemon to a GPU node (`kernelskill-gpu --listen`, a node
// agent: fleet/node_agent.hpp). This is the one place where a node is connected to
// and checked; discovery at start and every reconnection go through it.
//
// What it promises:
// - the link is a TCP connection and CAF's own handshake, then ours (node_handshake):
//   the node must publish the node agent's interface (a plain `--worker`, or another
//   version of KernelSkill, is refused with a message saying so) and answer describe
//   with this protocol version;
// - the whole of it is bounded by timeout_s: a node that accepts the connection but
//   never answers (stopped, hung) is an error, not a wait;
// - errors name the node ("HOST:PORT: …") and say what to check.
//
// - with a token (gpus.remote_token_file / remote_token_env), the node must prove it
//   knows it and the daemon proves it too, before CAF's handshake
//   (protocol/worker_link.hpp): a node without the token, or one that asks for none
//   while the daemon has one, is refused with a message saying which.

#include <cstdint>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "base/result.hpp"
#include "protocol/protocol.hpp"

namespace ks {

struct node_link {
  gpu_node_actor node;
  worker_info info;  // the node's answer to describe: its host, pid and devices
};

using node_link_done = std::function<void(result<node_link>)>;

// Asynchronous, for event-based actors: `done` runs in `self`'s context, once.
// `token`: the shared secret (empty: none, for nodes on loopback).
void open_node_link(caf::event_based_actor* self, const std::string& host, uint16_t port, const std::string& token,
                    double timeout_s, node_link_done done);

// Blocking, for discovery at start (runs the asynchronous one on a helper actor).
result<node_link> open_node_link(caf::actor_system& sys, const std::string& host, uint16_t port,
                                 const std::string& token, double timeout_s);

// The checks after the connection (and the token's handshake) are up: a describe
// whose protocol version must match. `done` gets the node's self-description or why the
// node is refused.
void node_handshake(caf::event_based_actor* self, const gpu_node_actor& node, const std::string& name, double timeout_s,
                    node_link_done done);

}  // namespace ks
