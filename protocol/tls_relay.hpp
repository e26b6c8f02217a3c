#pragma once
// The relay of encrypted worker links (protocol/link_tls.hpp). CAF's network layer
// reads and writes its sockets itself, so an encrypted link gives CAF one end of a Unix
// socket pair, and the relay moves bytes between the other end and TLS on the link's
// TCP socket: what CAF writes is encrypted before it reaches the network, what arrives
// is decrypted before CAF reads it.
//
// What it promises:
// - one thread in the process serves every link (a poll loop), started with the first
//   link; a link that is slow to read holds back only its own bytes (each direction
//   buffers at most 64 KiB, then waits for its reader);
// - when the peer closes or resets the connection, or TLS fails, CAF's socket gets
//   what was decrypted before, then its end (as CAF saw a TCP connection end); when CAF
//   closes its side, what it wrote before is still encrypted and sent, then TLS's
//   close_notify — for at most 30 s when the peer does not read (a stopped node) —
//   and both sockets are closed and the session freed;
// - no byte is lost or reordered while both sides are open;
// - no SIGPIPE: the relay writes with MSG_NOSIGNAL (link_tls.cpp's socket BIO);
// - at exit the thread is stopped and joined before OpenSSL cleans up (the relay starts
//   OpenSSL before the thread, so its own teardown runs first).

#include <cstddef>

struct ssl_st;

namespace ks {

// Hands a link to the relay: `ssl`, a TLS session whose handshake has finished on the
// non-blocking TCP socket `tcp_fd`, and `plain_fd`, the relay's non-blocking end of the
// Unix socket pair whose other end CAF holds. The relay owns all three from now on.
void relay_tls(ssl_st* ssl, int tcp_fd, int plain_fd);

// How many links the relay serves now (tests: a closed link is gone).
size_t relayed_links();

}  // namespace ks
