#include "daemon/guarded_server.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

namespace ks {

namespace {

using clock = std::chrono::steady_clock;
constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

// The connection this thread serves; null outside a connection.
thread_local guarded_server::connection* current = nullptr;

// A thread per connection: a job starts at once on an idle thread or a new one, up to
// `max` threads; past that it waits for one. httplib's own pool has a fixed few
// threads, which a few slow connections fill.
class elastic_pool : public httplib::TaskQueue {
 public:
  explicit elastic_pool(size_t max) : max_(max) {}

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    jobs_.push_back(std::move(fn));
    if (idle_ == 0 && threads_.size() < max_) threads_.emplace_back([this] { run(); });
    else ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and nothing left to do
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const size_t max_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stop_ = false;
};

void ip_and_port(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST] = {0}, serv[NI_MAXSERV] = {0};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

}  // namespace

// httplib's Stream over a connection's socket: reads wait no longer than the read
// timeout and never past the connection's deadline; a buffer serves the line reader,
// which reads a byte at a time.
class deadline_stream : public httplib::Stream {
 public:
  deadline_stream(guarded_server::connection& c, int read_timeout_ms, int write_timeout_ms)
      : c_(c), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  // Waits for bytes up to `timeout_ms`, and never past the deadline.
  bool wait_readable(int timeout_ms) const {
    if (off_ < size_) return true;
    const int64_t deadline = c_.deadline_ns.load();
    if (deadline != kNoDeadline) {
      const int64_t left_ms = (deadline - now_ns() + 999999) / 1000000;  // rounded up
      if (left_ms <= 0) {
        c_.expired = true;
        return false;
      }
      timeout_ms = static_cast<int>(std::min<int64_t>(timeout_ms, left_ms));
    }
    pollfd p{c_.fd, POLLIN, 0};
    int r;
    do r = ::poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
  }

  bool is_readable() const override { return wait_readable(read_timeout_ms_); }

  bool is_writable() const override {
    pollfd p{c_.fd, POLLOUT, 0};
    int r;
    do r = ::poll(&p, 1, write_timeout_ms_);
    while (r < 0 && errno == EINTR);
    return r > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ >= size_) {
      const bool readable = is_readable();
      if (past_deadline() || !readable) return -1;  // past_deadline marks an expiry
      ssize_t n;
      do n = ::recv(c_.fd, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      size_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, size_ - off_);
    std::memcpy(ptr, buf_ + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  }

  socket_t socket() const override { return c_.fd; }

  // Whether the deadline has passed (and if so, the connection expired).
  bool check_deadline() const { return past_deadline(); }

 private:
  bool past_deadline() const {
    const int64_t deadline = c_.deadline_ns.load();
    if (deadline == kNoDeadline || now_ns() < deadline) return false;
    c_.expired = true;
    return true;
  }

  guarded_server::connection& c_;
  const int read_timeout_ms_, write_timeout_ms_;
  char buf_[4096];
  size_t off_ = 0, size_ = 0;
};

guarded_server::guarded_server(connection_limits limits) : limits_(limits) {
  new_task_queue = [this] { return new elastic_pool(limits_.max_threads); };
  // Called once an answer is written: the next request's head is awaited from now.
  set_logger([this](const httplib::Request&, const httplib::Response&) {
    if (current) set_deadline(*current, true, limits_.header_timeout_s);
  });
}

guarded_server::~guarded_server() { stop(); }

void guarded_server::set_deadline(connection& c, bool waiting, double seconds) {
  std::lock_guard lock(mu_);
  c.waiting = waiting;
  c.deadline_ns = seconds < 0 ? kNoDeadline : now_ns() + static_cast<int64_t>(seconds * 1e9);
}

void guarded_server::head_received() {
  if (current) set_deadline(*current, false, limits_.body_timeout_s);
}

void guarded_server::body_received() {
  if (current) set_deadline(*current, false, -1);
}

bool guarded_server::process_and_close_socket(socket_t sock) {
  connection* c = nullptr;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    // Room for one more connection waiting for its head: the oldest such goes. Its
    // thread sees the shutdown at once and closes the socket itself.
    size_t waiting = 0;
    connection* oldest = nullptr;
    for (auto& [_, o] : open_)
      if (o.waiting && !o.dropped) {
        ++waiting;
        if (!oldest) oldest = &o;  // the map is in arrival order
      }
    if (waiting >= limits_.max_pending && oldest) {
      ::shutdown(oldest->fd, SHUT_RDWR);
      oldest->dropped = true;
      count_drop();
    }
    id = ++next_;
    c = &open_[id];
    c->fd = sock;
    c->deadline_ns = now_ns() + static_cast<int64_t>(limits_.header_timeout_s * 1e9);
  }
  current = c;
  deadline_stream strm(*c, static_cast<int>(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000),
                       static_cast<int>(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000));
  // As httplib's own loop: requests on one connection while keep-alive lasts, each
  // head awaited no longer than its deadline.
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!strm.wait_readable(static_cast<int>(keep_alive_timeout_sec_ * 1000))) {
      strm.check_deadline();
      break;
    }
    bool closed = false;
    ok = process_request(strm, left == 1, closed, nullptr);
    // A request whose head or body missed its deadline was answered (400) at most: the
    // connection ends with it, or the answer would start a new head's deadline.
    if (!ok || closed || c->expired) break;
  }
  current = nullptr;
  {
    std::lock_guard lock(mu_);
    if (open_[id].expired && !open_[id].dropped) count_drop();
    open_.erase(id);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace ks
