#pragma once
// Encryption of a worker link (protocol/worker_link.hpp): once the token's handshake
// has passed, the TCP connection carries TLS 1.3, and CAF's messages (kernels,
// references, results) travel inside it.
//
// The key is the token: TLS 1.3 with an external pre-shared key (RFC 8446 §2.2, no
// certificates), PSK = HKDF-SHA256(salt = the handshake's two challenges Cw‖Cp,
// key = the token, info = "kernelskill worker link: TLS 1.3 PSK"), identity
// "kernelskill-worker-link", cipher suite TLS_AES_128_GCM_SHA256 only, key exchange
// psk_dhe_ke (an ephemeral X25519 exchange besides the PSK: a token learnt later does
// not decrypt a recorded link). The worker is TLS's server, the peer its client; no
// session tickets, no resumption, no 0-RTT.
//
// What it promises:
// - a side without the token's key cannot complete the handshake (the PSK binder does
//   not verify), so neither side's plain socket ever carries a byte from it;
// - the handshake ends by `deadline`, or fails saying so;
// - OpenSSL reads no configuration file (the worker runs in a sandbox that cannot
//   read /etc/ssl), and nothing here raises SIGPIPE.

#include <chrono>
#include <string>

#include "base/result.hpp"

namespace ks {

enum class tls_side {
  worker,  // the listening side: TLS's server
  peer,    // the connecting side (the daemon, `kernelskill run`, a node agent): TLS's client
};

// The cipher suite a link uses (for docs and logs).
inline constexpr const char* link_cipher_suite = "TLS_AES_128_GCM_SHA256";

// Runs the TLS handshake on the connected, non-blocking TCP socket `fd` with the key
// derived from `token` and `binding` (the token handshake's challenges; both sides
// must give the same). On success returns a non-blocking, close-on-exec Unix stream
// socket that carries the link's plain bytes (hand it to CAF), and `fd` belongs to the
// relay (protocol/tls_relay.hpp) from then on. On failure `fd` is still the caller's,
// and the error says why in words (never the token).
result<int> encrypt_link(int fd, tls_side side, const std::string& token, const std::string& binding,
                         std::chrono::steady_clock::time_point deadline);

}  // namespace ks
