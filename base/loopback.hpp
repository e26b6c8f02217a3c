#pragma once
// Whether a host is this machine only (loopback), for listeners that refuse to serve
// beyond it without a secret: the daemon's HTTP API (daemon/http_api.hpp) and the GPU
// worker's port (protocol/worker_link.hpp).
//
// What it promises: a name is loopback only when every address it resolves to is
// (127.0.0.0/8, ::1) — "127.example.com" is a name like any other, and a name that
// resolves to nothing is not loopback.

#include <string>
#include <string_view>

namespace ks {

// Whether `host` (a name or an address, [::1] in brackets too) resolves to loopback
// addresses only (127.0.0.0/8, ::1). A name that does not resolve is not loopback.
bool is_loopback_host(const std::string& host);

// Whether `host` is literally a loopback name or address — localhost, 127.x.y.z, ::1 —
// without resolving it: what a Host or Origin header must say to reach a daemon that
// serves loopback only.
bool is_loopback_name(std::string_view host);

}  // namespace ks
