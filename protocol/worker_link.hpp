#pragma once
// The link between the daemon (or `kernelskill run`) and a GPU worker
// (`kernelskill-gpu --listen`) over CAF's network layer, guarded by a shared secret:
// whoever reaches a worker's port runs code on its GPU, so a worker with a token lets
// no peer speak CAF to it until the peer has proved it knows the token, and then
// everything CAF sends on the link (kernels, references, results) travels encrypted
// with a key derived from that token.
//
// The handshake, on the TCP connection before CAF's own (HMAC-SHA256, base/secret.hpp):
//   worker → peer:  "KSW2", a 32-byte random challenge Cw
//   peer → worker:  "KSW2", a 32-byte random challenge Cp, HMAC(token, "client" Cw Cp)
//   worker → peer:  1 and HMAC(token, "worker" Cp Cw), or 0 and the connection closed;
// then TLS 1.3 keyed by the token and both challenges (protocol/link_tls.hpp: an
// external PSK, no certificates, TLS_AES_128_GCM_SHA256 with an ephemeral X25519
// exchange), and CAF's BASP inside it: CAF reads and writes a Unix socket whose bytes
// the process's relay (protocol/tls_relay.hpp) moves to and from TLS.
// The token itself never crosses the network, a recorded handshake is worth nothing
// later (fresh challenges), and the peer checks the worker's answer too: a daemon with
// a token talks only to workers that know it. ("KSW1" was the same handshake followed
// by CAF in clear: KernelSkill before encrypted links; a peer refuses such a worker.)
// A worker without a token speaks CAF in clear, and only on loopback.
//
// What it promises:
// - a worker with a token hands a connection to CAF only after a correct proof and a
//   completed TLS handshake; a wrong, missing or late one (5 s for both) closes the
//   connection, so nothing of a task, nor any CAF message, is read from an
//   unauthenticated peer, nor from one that proves the token and then speaks in
//   clear; at most 16 proofs are under way at once (a 17th cuts the oldest short:
//   silent peers cannot keep a daemon out, whose handshake takes one round trip);
// - with a token, no byte CAF sends either way crosses the network in clear, on the
//   worker's side (inside its seccomp filter and Landlock: the relay needs only a Unix
//   socket pair) and on the peer's;
// - a worker without a token listens on loopback only: publish_worker refuses any host
//   that does not resolve to loopback alone (base/loopback.hpp);
// - connect_worker's errors say which side lacks or refuses the token, never the token;
// - refused peers are logged once per address a minute, the others counted and the
//   counts logged in one line (protocol/refusal_log.hpp): a flood of refused
//   connections does not write a line each.

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <caf/fwd.hpp>

#include "base/result.hpp"
#include "protocol/protocol.hpp"

namespace ks {

// The environment variable a worker and the daemon read the token from by default.
inline constexpr const char* default_worker_token_env = "KS_WORKER_TOKEN";

// Publishes `worker` on host:port (port 0: a free one) and returns the port. With a
// token, peers must pass the handshake above; without one, `host` must be loopback.
result<uint16_t> publish_worker(caf::actor_system& sys, const gpu_worker_actor& worker, const std::string& host,
                                uint16_t port, const std::string& token);

// How long an address's later refusals are counted instead of logged (default 60 s).
void set_refusal_log_interval(std::chrono::milliseconds interval);

// Publishes any actor the same way (the node agent's interface, fleet/node_agent.hpp):
// `ifs` are its message types (`sys.message_types(handle)`).
result<uint16_t> publish_guarded(caf::actor_system& sys, caf::strong_actor_ptr actor, std::set<std::string> ifs,
                                 const std::string& host, uint16_t port, const std::string& token);

// For event-based callers that connect without blocking: a middleman actor whose
// connect runs the peer's side of the handshake with `token` (empty: none) before
// CAF's. Request `caf::connect_atom_v, host, port` from it as from the system's
// middleman; when a connect fails, *why holds the reason in words (empty: CAF's error
// says it). Send it an exit once answered.
caf::actor spawn_guarded_connector(caf::actor_system& sys, const std::string& token, std::shared_ptr<std::string> why,
                                   double timeout_s);

// The worker at host:port, reached with `token` (empty: none). Fails when the worker
// asks for a token and none is given, refuses the one given, does not know it, or
// does not ask for one while one is given (it would be a worker anyone may use).
result<gpu_worker_actor> connect_worker(caf::actor_system& sys, const std::string& host, uint16_t port,
                                        const std::string& token, double timeout_s = 30);

}  // namespace ks
