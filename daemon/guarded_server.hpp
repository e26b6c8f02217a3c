#pragma once
// The daemon's HTTP server (cpp-httplib's Server) made safe against slow clients
// (slowloris): with httplib alone, connections that send a request's headers a byte at
// a time — each byte inside the per-read timeout — held every thread of its fixed
// pool, and an authorised health check waited for over a minute.
//
// What it promises:
// - every connection gets a thread of its own (up to max_threads), so a slow one never
//   holds a thread a fast one is waiting for;
// - a request's line and headers must arrive within header_timeout_s of the connection
//   (or of the previous answer on it, keep-alive wait included), and its body within
//   body_timeout_s of its headers; past a deadline the connection is closed, however
//   steadily bytes come;
// - at most max_pending connections wait for their request's head at once: one more
//   drops the oldest waiting, so clients that have not sent a whole request head
//   cannot hold more than that;
// - what a request's handler does takes the time it takes: the deadlines bound what
//   the client sends, not the daemon's work.
//
// Use: head_received() first thing in the pre-routing handler, body_received() first
// thing in each route's handler; the logger is this class's (it marks the answer).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include <httplib.h>

namespace ks {

struct connection_limits {
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  size_t max_pending = 32;    // connections waiting for their request head
  size_t max_threads = 256;   // connections served at once
};

class guarded_server : public httplib::Server {
 public:
  explicit guarded_server(connection_limits limits);
  ~guarded_server() override;
  guarded_server(const guarded_server&) = delete;
  guarded_server& operator=(const guarded_server&) = delete;

  // This thread's request: its head has arrived (the body's deadline starts); its body
  // has been read (no deadline while the handler runs).
  void head_received();
  void body_received();

  // Connections closed for a deadline or dropped for room, since the start.
  uint64_t dropped() const { return dropped_; }

  // One connection's state; the stream reading it checks `deadline_ns` (steady clock,
  // nanoseconds; INT64_MAX: none).
  struct connection {
    int fd = -1;
    bool waiting = true;   // for a request head (counted against max_pending)
    bool dropped = false;
    std::atomic<bool> expired{false};  // a read gave up at the deadline
    std::atomic<int64_t> deadline_ns{0};
  };

 private:
  bool process_and_close_socket(socket_t sock) override;
  void set_deadline(connection& c, bool waiting, double seconds);
  void count_drop() { ++dropped_; }

  connection_limits limits_;
  std::mutex mu_;
  std::map<uint64_t, connection> open_;  // by arrival order
  uint64_t next_ = 0;
  std::atomic<uint64_t> dropped_{0};

  friend class deadline_stream;
};

}  // namespace ks
