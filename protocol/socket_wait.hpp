#pragma once
// Waiting on one socket with a deadline: the handshakes of a worker link
// (protocol/worker_link.cpp, protocol/link_tls.cpp) run on non-blocking sockets and
// must end by their deadline, whatever the peer does.

#include <chrono>

namespace ks {

// Waits until `events` (POLLIN, POLLOUT) are ready on `fd` or `deadline` passes; false
// on timeout or error. A signal's interruption is waited through.
bool wait_for_socket(int fd, short events, std::chrono::steady_clock::time_point deadline);

}  // namespace ks
