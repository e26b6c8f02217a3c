#include "tests/support/http_burst.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ks::testing {

namespace {

using clock = std::chrono::steady_clock;

double ms_since(clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); }

// A non-blocking socket connecting to host:port from `from`; -1 when it cannot start.
int start_connect(const std::string& host, int port, const std::string& from) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (!from.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, from.c_str(), &local.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool connect_failed(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0;
}

// The status and body of a whole answer in `got`; status 0 when it is not whole.
int parse_answer(const std::string& got, std::string* body) {
  if (got.rfind("HTTP/1.", 0) != 0 || got.size() < 12) return 0;
  const auto head_end = got.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  const int status = std::atoi(got.c_str() + 9);
  std::string head = got.substr(0, head_end);
  for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  *body = got.substr(head_end + 4);
  if (auto at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    const size_t want = std::strtoull(head.c_str() + at + 17, nullptr, 10);
    if (body->size() < want) return 0;
    body->resize(want);
  }
  return status;
}

}  // namespace

void raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

std::string http_request(const std::string& method, const std::string& path, const std::string& body,
                         const std::string& content_type, const std::string& token) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) r += "Authorization: Bearer " + token + "\r\n";
  if (!content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  if (!body.empty() || method == "POST") r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "\r\n" + body;
}

burst_result http_burst(const std::string& host, int port, const std::vector<std::string>& requests, double timeout_s,
                        const std::string& from) {
  enum class state { connecting, ready, sending, reading, done };
  struct conn {
    int fd = -1;
    state st = state::connecting;
    size_t sent = 0;
    std::string got;
    clock::time_point sent_at;
  };
  burst_result r;
  r.requests = requests.size();
  r.statuses.assign(requests.size(), 0);
  r.bodies.assign(requests.size(), "");
  const auto began = clock::now();
  const auto deadline = began + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  std::vector<conn> cs(requests.size());
  for (auto& c : cs) {
    c.fd = start_connect(host, port, from);
    if (c.fd < 0) {
      c.st = state::done;
      ++r.connect_failed;
    }
  }
  auto finish = [&](size_t i) {
    auto& c = cs[i];
    if (c.st == state::done) return;
    std::string body;
    const int status = parse_answer(c.got, &body);
    if (status > 0) {
      ++r.answered;
      ++r.by_status[status];
      r.statuses[i] = status;
      r.bodies[i] = std::move(body);
      r.latency_ms.push_back(ms_since(c.sent_at));
    } else {
      ++r.unanswered;
    }
    ::close(c.fd);
    c.st = state::done;
  };
  // Connections first (the daemon's backlog completes them before it accepts), then
  // every request at once.
  bool released = false;
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  while (clock::now() < deadline) {
    fds.clear();
    which.clear();
    size_t connecting = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
      auto& c = cs[i];
      if (c.st == state::done || (c.st == state::ready && !released)) continue;
      short ev = c.st == state::reading ? POLLIN : POLLOUT;
      if (c.st == state::connecting) ++connecting;
      fds.push_back({c.fd, ev, 0});
      which.push_back(i);
    }
    if (!released && (connecting == 0 || clock::now() - began > std::chrono::seconds(5))) {
      released = true;
      for (auto& c : cs)
        if (c.st == state::ready) {
          c.st = state::sending;
          c.sent_at = clock::now();
        }
      continue;
    }
    if (fds.empty()) break;
    int n = ::poll(fds.data(), fds.size(), 50);
    if (n < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const size_t i = which[k];
      auto& c = cs[i];
      if (c.st == state::connecting) {
        if (connect_failed(c.fd)) {
          ::close(c.fd);
          c.st = state::done;
          ++r.connect_failed;
        } else {
          c.st = released ? state::sending : state::ready;
          if (released) c.sent_at = clock::now();
        }
      } else if (c.st == state::sending) {
        const std::string& req = requests[i];
        ssize_t w = ::send(c.fd, req.data() + c.sent, req.size() - c.sent, MSG_NOSIGNAL);
        if (w > 0)
          c.sent += static_cast<size_t>(w);
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
          finish(i);
        if (c.st == state::sending && c.sent == req.size()) c.st = state::reading;
      } else if (c.st == state::reading) {
        char buf[16384];
        ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got > 0)
          c.got.append(buf, static_cast<size_t>(got));
        else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
          finish(i);
      }
    }
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].st != state::done) finish(i);
  }
  r.wall_s = ms_since(began) / 1000;
  return r;
}

std::string burst_result::summary() const {
  std::string s = std::to_string(requests) + " requests: " + std::to_string(answered) + " answered (";
  bool first = true;
  for (auto& [st, n] : by_status) {
    s += (first ? "" : ", ") + std::to_string(st) + ": " + std::to_string(n);
    first = false;
  }
  s += "), " + std::to_string(unanswered) + " unanswered, " + std::to_string(connect_failed) + " not connected";
  if (!latency_ms.empty()) {
    auto l = latency_ms;
    std::sort(l.begin(), l.end());
    auto at = [&](double q) {
      return l[std::min(l.size() - 1, static_cast<size_t>(q * static_cast<double>(l.size())))];
    };
    char buf[160];
    std::snprintf(buf, sizeof buf, "; latency ms p50 %.1f, p99 %.1f, max %.1f; %.2f s in all", at(0.5), at(0.99),
                  l.back(), wall_s);
    s += buf;
  }
  return s;
}

slow_bodies::slow_bodies(const std::string& host, int port, size_t connections,
                         const std::vector<std::string>& from_addresses, std::chrono::milliseconds every,
                         const std::string& token, size_t body_bytes) {
  std::string head = "POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\n";
  if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
  head += "Content-Length: " + std::to_string(body_bytes) + "\r\n\r\n";
  // The connections are made here, so that they are all in when the constructor returns.
  thread_ = std::thread(&slow_bodies::run, this, host, port, connections, from_addresses, every, head, body_bytes);
  while (connected_ < connections && !stop_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

slow_bodies::~slow_bodies() {
  stop_ = true;
  thread_.join();
}

void slow_bodies::run(std::string host, int port, size_t n, std::vector<std::string> from,
                      std::chrono::milliseconds every, std::string head, size_t body_bytes) {
  struct conn {
    int fd;
    size_t body_sent = 0;
    bool open = true;
  };
  std::vector<conn> cs;
  for (size_t i = 0; i < n && !stop_; ++i) {
    int fd = start_connect(host, port, from.empty() ? "" : from[i % from.size()]);
    if (fd < 0) {
      stop_ = true;
      break;
    }
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 5000) <= 0 || connect_failed(fd) ||
        ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) {
      ::close(fd);
      stop_ = true;
      break;
    }
    cs.push_back({fd});
    ++open_;
    ++connected_;
  }
  // Closes are seen within 50 ms; a byte goes out on each open connection every `every`.
  auto next_byte = clock::now();
  while (!stop_) {
    const bool send_now = clock::now() >= next_byte;
    if (send_now) next_byte += every;
    for (auto& c : cs) {
      if (!c.open) continue;
      char buf[4096];
      ssize_t got = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        c.open = false;
        --open_;
        continue;
      }
      if (send_now && c.body_sent < body_bytes && ::send(c.fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
        ++c.body_sent;
        ++sent_;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& c : cs) ::close(c.fd);
}

}  // namespace ks::testing
