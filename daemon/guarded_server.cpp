#include "daemon/guarded_server.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <string>
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
// threads, which a few slow connections fill. A thread is started for every job that
// no idle thread will take: `idle_` counts threads waiting for a job, and a woken
// thread leaves that count only when it takes one, so two jobs arriving before an idle
// thread wakes get two threads (comparing idle_ with 0 gave the second none).
class elastic_pool : public httplib::TaskQueue {
 public:
  elastic_pool(size_t max, std::shared_ptr<guarded_server::pool_state> state) : max_(max), state_(std::move(state)) {}

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_ + starting_ && threads_.size() < max_) {
      ++starting_;
      threads_.emplace_back([this] { run(); });
    } else {
      ready_.notify_one();
    }
    publish();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& t : threads_) t.join();
    state_->waiting_for_thread = 0;
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    --starting_;
    for (;;) {
      ++idle_;
      ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and nothing left to do
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      publish();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  // Under mu_: how many jobs wait for a thread that is not there (all max_ are busy).
  void publish() {
    const size_t ready = idle_ + starting_;
    state_->waiting_for_thread = threads_.size() >= max_ && jobs_.size() > ready ? jobs_.size() - ready : 0;
  }

  const size_t max_;
  std::shared_ptr<guarded_server::pool_state> state_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;      // threads waiting for a job
  size_t starting_ = 0;  // threads started that have not reached their loop yet
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

// The peer's address without its port ("" when it cannot be told).
std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::string ip;
  int port = 0;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  return ip;
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
  new_task_queue = [this] { return new elastic_pool(limits_.max_threads, pool_); };
  // Called once an answer is written: the next request's head is awaited from now.
  set_logger([this](const httplib::Request&, const httplib::Response&) {
    if (current) enter(*current, phase::head, limits_.header_timeout_s);
  });
  watcher_ = std::thread([this] { watch(); });
}

guarded_server::~guarded_server() {
  stop();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

void guarded_server::widen_backlog() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, SOMAXCONN);
}

void guarded_server::enter(connection& c, phase p, double seconds) {
  std::lock_guard lock(mu_);
  const int64_t now = now_ns();
  c.at = p;
  c.phase_since_ns = now;
  c.deadline_ns = seconds < 0 ? kNoDeadline : now + static_cast<int64_t>(seconds * 1e9);
  if (p == phase::body) make_room(now);  // this client's slow bodies, at once
}

void guarded_server::head_received() {
  if (current) enter(*current, phase::body, limits_.body_timeout_s);
}

void guarded_server::body_received() {
  if (current) enter(*current, phase::handling, -1);
}

void guarded_server::close_after_answer() {
  if (!current) return;
  std::lock_guard lock(mu_);
  current->close_after = true;
}

void guarded_server::drop(connection& c) {
  // Its thread sees the shutdown at once and closes the socket itself.
  ::shutdown(c.fd, SHUT_RDWR);
  c.dropped = true;
  ++dropped_;
}

void guarded_server::make_room(int64_t now) {
  const auto grace = static_cast<int64_t>(limits_.grace_s * 1e9);
  std::vector<connection*> slow_heads;                          // oldest first (arrival order)
  std::map<std::string, std::vector<connection*>> slow_bodies;  // by peer
  size_t leaving = 0;                                           // dropped, their threads not gone yet
  for (auto& [_, c] : open_) {
    if (c.dropped) {
      ++leaving;
      continue;
    }
    if (now - c.phase_since_ns < grace) continue;
    if (c.at == phase::head)
      slow_heads.push_back(&c);
    else if (c.at == phase::body)
      slow_bodies[c.peer].push_back(&c);
  }
  auto by_age = [](const connection* a, const connection* b) { return a->phase_since_ns < b->phase_since_ns; };
  // Slow heads beyond max_pending: the oldest go.
  size_t head_at = 0;
  while (slow_heads.size() - head_at > limits_.max_pending) drop(*slow_heads[head_at++]);
  // One client's slow bodies beyond its share: its oldest go.
  std::vector<connection*> bodies;
  for (auto& [_, list] : slow_bodies) {
    std::sort(list.begin(), list.end(), by_age);
    size_t at = 0;
    while (list.size() - at > limits_.max_body_per_client) drop(*list[at++]);
    bodies.insert(bodies.end(), list.begin() + static_cast<std::ptrdiff_t>(at), list.end());
  }
  // Connections wait for a thread: slow heads (idle keep-alives among them) go first,
  // then slow bodies, oldest first, one for each waiting connection.
  const size_t waiting = pool_->waiting_for_thread;
  size_t need = waiting > leaving ? waiting - leaving : 0;
  for (; need > 0 && head_at < slow_heads.size(); --need) drop(*slow_heads[head_at++]);
  std::sort(bodies.begin(), bodies.end(), by_age);
  for (size_t i = 0; need > 0 && i < bodies.size(); --need) drop(*bodies[i++]);
}

void guarded_server::watch() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    if (!stopping_) make_room(now_ns());
  }
}

bool guarded_server::process_and_close_socket(socket_t sock) {
  connection* c = nullptr;
  uint64_t id = 0;
  const std::string peer = peer_address(sock);
  {
    std::lock_guard lock(mu_);
    id = ++next_;
    c = &open_[id];
    c->fd = sock;
    c->peer = peer;
    c->at = phase::head;
    c->phase_since_ns = now_ns();
    c->deadline_ns = c->phase_since_ns + static_cast<int64_t>(limits_.header_timeout_s * 1e9);
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
    // connection ends with it, or the answer would start a new head's deadline. So
    // does one whose body was left unread.
    bool close_after = false;
    {
      std::lock_guard lock(mu_);
      close_after = c->close_after || c->dropped;
    }
    if (!ok || closed || c->expired || close_after) break;
  }
  current = nullptr;
  {
    std::lock_guard lock(mu_);
    if (open_[id].expired && !open_[id].dropped) ++dropped_;
    open_.erase(id);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace ks
