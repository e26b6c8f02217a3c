// The encryption of worker links (protocol/link_tls.hpp, protocol/tls_relay.hpp) on
// real TCP connections over loopback, a recording proxy between the two sides: the
// key is the token, a side with another key gets no byte through, what crosses the
// network is not the plain text, and the relay delivers every byte in order both ways
// and closes what it must.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>

#include "base/secret.hpp"
#include "protocol/link_tls.hpp"
#include "protocol/tls_relay.hpp"
#include "tests/support/recording_proxy.hpp"

using namespace ks;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ks::testing::recording_proxy;

namespace {

using clock_type = std::chrono::steady_clock;

int listen_loopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // EINPROGRESS: TLS waits for it
  return fd;
}

// Both sides of one link: the worker's TCP socket accepted from `listener`, the
// peer's connected to `port` (the proxy's), each encrypted with its own token.
struct link_pair {
  result<int> worker = error{"not run"};
  result<int> peer = error{"not run"};
  int worker_tcp = -1, peer_tcp = -1;
};

link_pair open_pair(int listener, uint16_t port, const std::string& worker_token, const std::string& peer_token,
                    std::chrono::milliseconds wait = 5000ms) {
  link_pair out;
  const std::string binding = random_bytes(64);  // the token handshake's Cw‖Cp
  const auto deadline = clock_type::now() + wait;
  out.peer_tcp = connect_loopback(port);
  auto worker = std::async(std::launch::async, [&] {
    out.worker_tcp = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    return encrypt_link(out.worker_tcp, tls_side::worker, worker_token, binding, deadline);
  });
  out.peer = encrypt_link(out.peer_tcp, tls_side::peer, peer_token, binding, deadline);
  out.worker = worker.get();
  return out;
}

void send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    REQUIRE(::poll(&p, 1, 10000) == 1);
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0)
      sent += static_cast<size_t>(n);
    else
      REQUIRE((errno == EAGAIN || errno == EINTR));
  }
}

// Exactly n bytes from fd (or what came before 10 s of silence or the end).
std::string recv_n(int fd, size_t n) {
  std::string got;
  char buf[65536];
  while (got.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) break;
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - got.size()), 0);
    if (r == 0) break;
    if (r > 0)
      got.append(buf, static_cast<size_t>(r));
    else if (errno != EAGAIN && errno != EINTR)
      break;
  }
  return got;
}

// Whether pred() holds within timeout_s, polled every 20 ms.
template <class Pred>
bool wait_until(double timeout_s, Pred pred) {
  const auto deadline = clock_type::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (!pred()) {
    if (clock_type::now() >= deadline) return pred();
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// Whether fd reads its end (0 bytes) within 10 s.
bool reads_end(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return false;
  char c;
  return ::recv(fd, &c, 1, 0) == 0;
}

}  // namespace

TEST_CASE("an encrypted link carries bytes both ways, and the network sees none of them in clear", "[link_tls]") {
  uint16_t port = 0;
  const int listener = listen_loopback(&port);
  recording_proxy proxy(port);
  const size_t before = relayed_links();
  auto link = open_pair(listener, proxy.port(), "a-shared-token-0123456789", "a-shared-token-0123456789");
  INFO((link.peer ? "" : link.peer.message()) << " / " << (link.worker ? "" : link.worker.message()));
  REQUIRE(link.peer);
  REQUIRE(link.worker);
  CHECK(relayed_links() == before + 2);

  const std::string to_worker = "extern \"C\" __global__ void KS_SECRET_KERNEL_to_worker_7f3a() {}";
  const std::string to_peer = "review of KS_SECRET_RESULT_to_peer_91c2: ok";
  send_all(*link.peer, to_worker);
  send_all(*link.worker, to_peer);
  CHECK(recv_n(*link.worker, to_worker.size()) == to_worker);
  CHECK(recv_n(*link.peer, to_peer.size()) == to_peer);

  const std::string wire = proxy.captured();
  CHECK(wire.size() > to_worker.size() + to_peer.size());  // the handshake and the records went through it
  CHECK(static_cast<unsigned char>(wire[0]) == 0x16);      // a TLS handshake record: the ClientHello
  CHECK(wire.find("KS_SECRET_KERNEL") == std::string::npos);
  CHECK(wire.find("KS_SECRET_RESULT") == std::string::npos);
  CHECK(wire.find("a-shared-token") == std::string::npos);

  // The peer's side closes: the worker's side reads the end, and the relay lets both go.
  ::close(*link.peer);
  CHECK(reads_end(*link.worker));
  ::close(*link.worker);
  CHECK(wait_until(10, [&] { return relayed_links() == before; }));
  ::close(listener);
}

TEST_CASE("a side whose token differs cannot complete the TLS handshake, and gets no plain socket", "[link_tls]") {
  uint16_t port = 0;
  const int listener = listen_loopback(&port);
  const size_t before = relayed_links();
  auto link = open_pair(listener, port, "the-workers-token-0123456789", "another-token-0123456789");
  REQUIRE_FALSE(link.peer);
  REQUIRE_FALSE(link.worker);
  CHECK_THAT(link.peer.message(), Contains("TLS handshake"));
  CHECK_THAT(link.worker.message(), Contains("TLS handshake"));
  CHECK_THAT(link.peer.message(), !Contains("token-0123456789"));
  CHECK(relayed_links() == before);
  ::close(link.peer_tcp);
  ::close(link.worker_tcp);

  // The same token with another binding (another handshake's challenges) fails too.
  link_pair spliced;
  const auto deadline = clock_type::now() + 5s;
  spliced.peer_tcp = connect_loopback(port);
  auto worker = std::async(std::launch::async, [&] {
    spliced.worker_tcp = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    return encrypt_link(spliced.worker_tcp, tls_side::worker, "same-token-0123456789", random_bytes(64), deadline);
  });
  spliced.peer = encrypt_link(spliced.peer_tcp, tls_side::peer, "same-token-0123456789", random_bytes(64), deadline);
  spliced.worker = worker.get();
  CHECK_FALSE(spliced.peer);
  CHECK_FALSE(spliced.worker);
  ::close(spliced.peer_tcp);
  ::close(spliced.worker_tcp);
  ::close(listener);
}

TEST_CASE("a TLS handshake with a silent peer ends at its deadline", "[link_tls]") {
  uint16_t port = 0;
  const int listener = listen_loopback(&port);
  const int silent = connect_loopback(port);
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  const auto t0 = clock_type::now();
  auto r = encrypt_link(fd, tls_side::worker, "a-shared-token-0123456789", random_bytes(64), t0 + 300ms);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.message(), Contains("did not finish in time"));
  CHECK(clock_type::now() - t0 < 3s);
  ::close(fd);
  ::close(silent);
  ::close(listener);
}

TEST_CASE("the relay delivers megabytes both ways at once, every byte in order", "[link_tls]") {
  uint16_t port = 0;
  const int listener = listen_loopback(&port);
  auto link = open_pair(listener, port, "a-shared-token-0123456789", "a-shared-token-0123456789");
  REQUIRE(link.peer);
  REQUIRE(link.worker);
  std::mt19937_64 rng(44);
  auto noise = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  const std::string up = noise(6 << 20), down = noise(5 << 20);
  auto w1 = std::async(std::launch::async, [&] { send_all(*link.peer, up); });
  auto w2 = std::async(std::launch::async, [&] { send_all(*link.worker, down); });
  auto r1 = std::async(std::launch::async, [&] { return recv_n(*link.worker, up.size()); });
  auto r2 = std::async(std::launch::async, [&] { return recv_n(*link.peer, down.size()); });
  w1.get();
  w2.get();
  CHECK(r1.get() == up);
  CHECK(r2.get() == down);
  // The worker's side closes after writing: the peer still reads all of it, then the end.
  const std::string last = noise(300 << 10);
  send_all(*link.worker, last);
  ::close(*link.worker);
  CHECK(recv_n(*link.peer, last.size()) == last);
  CHECK(reads_end(*link.peer));
  ::close(*link.peer);
  ::close(listener);
}
