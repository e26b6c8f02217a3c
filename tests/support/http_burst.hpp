#pragma once
// Many HTTP connections at once, over real sockets, for the daemon's burst and slow-body
// tests (tests/daemon_hardening_test.cpp) and the load bench (bench/daemon/): a burst of
// requests sent all at once, each on a connection of its own, read until the daemon
// closes; and slow-body clients, each sending a request head and then a body byte at a
// time. One thread drives each with poll(), so thousands of connections cost no
// thousands of threads.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ks::testing {

// What a burst got back.
struct burst_result {
  size_t requests = 0;
  size_t answered = 0;    // a whole answer (status line, head, body) came back
  size_t unanswered = 0;  // closed, reset or timed out without an answer
  size_t connect_failed = 0;
  std::map<int, size_t> by_status;  // answered, by HTTP status
  std::vector<double> latency_ms;   // per answered request: from its connect to its answer's end
  std::vector<std::string> bodies;  // per request, the answer's body ("" when none)
  std::vector<int> statuses;        // per request, the status (0 when none)
  double wall_s = 0;
  // "2000 requests: 2000 answered (200: 1900, 201: 100), latency ms p50 … p99 … max …"
  std::string summary() const;
};

// Sends each of `requests` (whole HTTP/1.1 requests, which should say
// `Connection: close`) on a connection of its own to host:port, all connections made
// before the first request is sent, and reads each answer to the daemon's close.
// `from`: the local address to connect from ("" any; 127.0.0.x tells clients apart on
// loopback). Gives up on what is unanswered after timeout_s.
burst_result http_burst(const std::string& host, int port, const std::vector<std::string>& requests, double timeout_s,
                        const std::string& from = "");

// A request for a burst: METHOD PATH with an optional body and token.
std::string http_request(const std::string& method, const std::string& path, const std::string& body = "",
                         const std::string& content_type = "", const std::string& token = "");

// Clients that send a POST head with a Content-Length of `body_bytes`, then one body
// byte per connection every `every`, until stopped; each connects from one of
// `from_addresses` in turn.
class slow_bodies {
 public:
  slow_bodies(const std::string& host, int port, size_t connections, const std::vector<std::string>& from_addresses,
              std::chrono::milliseconds every, const std::string& token = "", size_t body_bytes = 100000);
  ~slow_bodies();
  slow_bodies(const slow_bodies&) = delete;
  slow_bodies& operator=(const slow_bodies&) = delete;

  size_t connected() const { return connected_; }  // connections made
  size_t open() const { return open_; }            // of them, not closed by the daemon yet
  size_t bytes_sent() const { return sent_; }

 private:
  void run(std::string host, int port, size_t n, std::vector<std::string> from, std::chrono::milliseconds every,
           std::string head, size_t body_bytes);
  std::atomic<bool> stop_{false};
  std::atomic<size_t> connected_{0}, open_{0}, sent_{0};
  std::thread thread_;
};

// Raises this process's descriptor limit to its hard limit (a burst needs one each).
void raise_descriptor_limit();

}  // namespace ks::testing
