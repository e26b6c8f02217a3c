#include "tests/support/recording_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ks::testing {

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  return a;
}

}  // namespace

struct recording_proxy::state {
  uint16_t target = 0;
  int listener = -1;
  uint16_t port = 0;
  int wake[2] = {-1, -1};
  std::thread thread;
  mutable std::mutex mu;
  std::string captured;
  std::atomic<size_t> accepted{0};

  struct pair {
    int a, b;  // client side, target side
  };

  // Forwards what is there from `from` to `to` (blocking writes: a test's links are
  // small); false when `from` closed or either side failed.
  bool forward(int from, int to) {
    char buf[16384];
    const ssize_t n = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    {
      std::lock_guard lock(mu);
      captured.append(buf, static_cast<size_t>(n));
    }
    size_t sent = 0;
    while (sent < static_cast<size_t>(n)) {
      const ssize_t w = ::send(to, buf + sent, static_cast<size_t>(n) - sent, MSG_NOSIGNAL);
      if (w <= 0 && errno != EINTR) return false;
      if (w > 0) sent += static_cast<size_t>(w);
    }
    return true;
  }

  void run() {
    std::vector<pair> pairs;
    for (;;) {
      std::vector<pollfd> fds{{wake[0], POLLIN, 0}, {listener, POLLIN, 0}};
      for (auto& p : pairs) {
        fds.push_back({p.a, POLLIN, 0});
        fds.push_back({p.b, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
      if (fds[0].revents) break;
      std::vector<bool> over(pairs.size(), false);
      for (size_t i = 0; i < pairs.size(); ++i) {
        if (fds[2 + 2 * i].revents && !forward(pairs[i].a, pairs[i].b)) over[i] = true;
        if (!over[i] && fds[3 + 2 * i].revents && !forward(pairs[i].b, pairs[i].a)) over[i] = true;
      }
      std::vector<pair> kept;
      for (size_t i = 0; i < pairs.size(); ++i) {
        if (!over[i]) {
          kept.push_back(pairs[i]);
          continue;
        }
        ::close(pairs[i].a);
        ::close(pairs[i].b);
      }
      pairs.swap(kept);
      if (fds[1].revents & POLLIN) {
        const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) continue;
        accepted.fetch_add(1);
        const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        auto to = loopback(target);
        if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
          ::close(client);
          if (server >= 0) ::close(server);
          continue;
        }
        pairs.push_back({client, server});
      }
    }
    for (auto& p : pairs) {
      ::close(p.a);
      ::close(p.b);
    }
  }
};

recording_proxy::recording_proxy(uint16_t target) : s_(std::make_unique<state>()) {
  s_->target = target;
  s_->listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto a = loopback(0);
  socklen_t len = sizeof a;
  if (s_->listener < 0 || ::bind(s_->listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(s_->listener, 64) != 0 || ::getsockname(s_->listener, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe2(s_->wake, O_CLOEXEC) != 0)
    throw std::runtime_error("recording_proxy: cannot listen on loopback");
  s_->port = ntohs(a.sin_port);
  s_->thread = std::thread([s = s_.get()] { s->run(); });
}

recording_proxy::~recording_proxy() {
  const char c = 1;
  (void)!::write(s_->wake[1], &c, 1);
  s_->thread.join();
  ::close(s_->listener);
  ::close(s_->wake[0]);
  ::close(s_->wake[1]);
}

uint16_t recording_proxy::port() const { return s_->port; }

std::string recording_proxy::captured() const {
  std::lock_guard lock(s_->mu);
  return s_->captured;
}

size_t recording_proxy::connections() const { return s_->accepted.load(); }

}  // namespace ks::testing
