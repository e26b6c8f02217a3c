#pragma once
// A real daemon for a test case: tests/support/daemon_process.hpp's `kernelskill serve` (temp
// directory, store, loopback port 0, the scripted GPU worker: real NVRTC compiles,
// deterministic verdicts) with an api_client pointed at it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "daemon/api_client.hpp"
#include "tests/support/daemon_process.hpp"

namespace ks::testing {

struct daemon_settings {
  int tasks_in_flight = 1;
  int seeds = 1;
  int rounds = 2;
  int review_ms = 0;  // KS_SCRIPTED_REVIEW_MS: how long each review takes at least
  std::string token;  // the daemon's KS_TOKEN; empty: none
  bool with_gpu = true;
};

class running_daemon {
 public:
  explicit running_daemon(const daemon_settings& s) : process_(options(s)) {
    if (process_.start(90).empty()) FAIL("kernelskill serve did not start: " << process_.last_error());
    api_client_options co;
    co.server = process_.url();
    co.token = s.token;
    auto c = api_client::make(co);
    REQUIRE(c.ok());
    client_ = std::make_unique<api_client>(std::move(c).value());
  }

  const std::string& url() const { return process_.url(); }
  const api_client& client() const { return *client_; }
  daemon_process& process() { return process_; }
  const std::filesystem::path& dir() const { return process_.dir(); }
  std::string log() const { return process_.log(); }

  // Polls the task until pred(task) holds; fails the test after `timeout`.
  template <class Pred>
  api_task wait_for(const std::string& id, Pred pred, std::chrono::seconds timeout, const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    api_task last;
    for (;;) {
      auto d = client_->status(id);
      if (d.ok()) {
        last = d->task;
        if (pred(last)) return last;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        INFO("daemon log:\n" << log());
        FAIL("task " << id << " did not reach: " << what << " within " << timeout.count() << " s; last state "
                     << last.state << " round " << last.round << " (" << (d.ok() ? std::string() : d.message()) << ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

 private:
  static daemon_options options(const daemon_settings& s) {
    daemon_options o;
    o.tasks_in_flight = s.tasks_in_flight;
    o.seeds = s.seeds;
    o.rounds = s.rounds;
    o.review_ms = s.review_ms;
    o.token = s.token;
    o.with_gpu = s.with_gpu;
    return o;
  }

  daemon_process process_;
  std::unique_ptr<api_client> client_;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A TCP port on 127.0.0.1 that nothing listens on right now.
inline int unused_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  // Closed without listen(): a connect to it is refused, as a stopped daemon's is.
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace ks::testing
