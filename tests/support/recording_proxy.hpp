#pragma once
// A TCP proxy on loopback that keeps every byte it forwards: what someone who can read
// the network between the daemon and a GPU worker would see. Tests put it between a
// real connect and a real listening worker or node (127.0.0.1:port() forwards to
// 127.0.0.1:target) and look for a kernel's text in what it recorded.

#include <cstdint>
#include <memory>
#include <string>

namespace ks::testing {

class recording_proxy {
 public:
  // Listens on 127.0.0.1 (an ephemeral port) and forwards each connection it accepts to
  // 127.0.0.1:target; a side that closes closes the other.
  explicit recording_proxy(uint16_t target);
  ~recording_proxy();  // stops forwarding and closes every connection
  recording_proxy(const recording_proxy&) = delete;
  recording_proxy& operator=(const recording_proxy&) = delete;

  uint16_t port() const;
  // Every byte forwarded so far, either way, in the order it passed.
  std::string captured() const;
  // How many connections it has accepted.
  size_t connections() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace ks::testing
