#pragma once
// The daemon's HTTP server (cpp-httplib's Server) made safe against slow clients
// (slowloris, slow bodies) and bursts: with httplib alone, connections that send a
// request's headers a byte at a time held every thread of its fixed pool, and an
// authorised health check waited for over a minute.
//
// What it promises:
// - every connection gets a thread of its own (up to max_threads): a thread starts for
//   each connection that has none waiting for it, so a slow one never holds a thread a
//   fast one is waiting for; past max_threads, connections wait for a thread in arrival
//   order;
// - a request's line and headers must arrive within header_timeout_s of the connection
//   (or of the previous answer on it, keep-alive wait included), and its body within
//   body_timeout_s of its headers; past a deadline the connection is closed, however
//   steadily bytes come;
// - a burst of requests is answered, not dropped: only a connection that has waited
//   longer than grace_s for its request head (a slow or idle one) is ever dropped for
//   room. At most max_pending such connections wait at once (the oldest goes), and
//   when connections are waiting for a thread, the oldest of them go first;
// - one client (one peer address) has at most max_body_per_client connections sending
//   a body that is past grace_s: the oldest of its slow bodies is dropped for the next;
//   while connections wait for a thread, slow bodies (past grace_s) of any client go
//   after the slow heads;
// - what a request's handler does takes the time it takes: the deadlines bound what
//   the client sends, not the daemon's work.
//
// Use: head_received() first thing in the pre-routing handler, body_received() once a
// route has read its body; close_after_answer() when the request's body is left
// unread; the logger is this class's (it marks the answer).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <httplib.h>

namespace ks {

struct connection_limits {
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  size_t max_pending = 32;         // slow connections waiting for their request head
  size_t max_threads = 256;        // connections served at once
  double grace_s = 1;              // a head or body slower than this is a slow one
  size_t max_body_per_client = 8;  // slow bodies of one peer address at once
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
  // This thread's connection ends after the answer being made (its request's body was
  // not read, so what follows on it is not a request).
  void close_after_answer();

  // Lets the kernel queue more connections than httplib's backlog of 5 (a burst is
  // queued, not refused); call after binding.
  void widen_backlog();

  // Connections closed for a deadline or dropped for room, since the start.
  uint64_t dropped() const { return dropped_; }

  // One connection's state; the stream reading it checks `deadline_ns` (steady clock,
  // nanoseconds; INT64_MAX: none).
  enum class phase { head, body, handling };
  struct connection {
    int fd = -1;
    std::string peer;  // the client's address, without the port
    phase at = phase::head;
    int64_t phase_since_ns = 0;  // when the current phase began
    bool dropped = false;
    bool close_after = false;
    std::atomic<bool> expired{false};  // a read gave up at the deadline
    std::atomic<int64_t> deadline_ns{0};
  };

  // What the thread pool tells the server: connections accepted that no thread has
  // taken yet, beyond the threads that are free to take them.
  struct pool_state {
    std::atomic<size_t> waiting_for_thread{0};
  };

 private:
  bool process_and_close_socket(socket_t sock) override;
  void enter(connection& c, phase p, double deadline_s);
  // Under mu_: drops what the promises above say must go, as of `now`.
  void make_room(int64_t now);
  void drop(connection& c);
  void watch();  // the watcher thread: make_room every 100 ms

  connection_limits limits_;
  std::mutex mu_;
  std::map<uint64_t, connection> open_;  // by arrival order
  uint64_t next_ = 0;
  std::atomic<uint64_t> dropped_{0};
  std::shared_ptr<pool_state> pool_ = std::make_shared<pool_state>();
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread watcher_;

  friend class deadline_stream;
};

}  // namespace ks
