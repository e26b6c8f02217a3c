#include "protocol/worker_link.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/scribe_impl.hpp>
#include <caf/scoped_actor.hpp>

#include "base/loopback.hpp"
#include "base/secret.hpp"
#include "protocol/link_tls.hpp"
#include "protocol/refusal_log.hpp"
#include "protocol/socket_wait.hpp"

namespace ks {

namespace {

using clock = std::chrono::steady_clock;
namespace net = caf::io::network;

// "KSW2": the token's handshake, then TLS (protocol/link_tls.hpp). "KSW1" was the same
// handshake followed by CAF in clear (KernelSkill before encrypted links).
const std::string kMagic = "KSW2";
const std::string kOldMagic = "KSW1";
constexpr size_t kChallenge = 32;
constexpr size_t kProof = 32;
constexpr auto kWorkerWait = std::chrono::seconds(5);  // a peer's whole handshake
constexpr size_t kMaxHandshakes = 16;

bool send_all(int fd, const std::string& data, clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    if (!wait_for_socket(fd, POLLOUT, deadline)) return false;
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      sent += static_cast<size_t>(n);
    else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return false;
  }
  return true;
}

// Exactly n bytes (never more: what follows is CAF's).
bool recv_exact(int fd, size_t n, std::string& out, clock::time_point deadline) {
  out.assign(n, '\0');
  size_t got = 0;
  while (got < n) {
    if (!wait_for_socket(fd, POLLIN, deadline)) return false;
    ssize_t r = ::recv(fd, out.data() + got, n - got, MSG_DONTWAIT);
    if (r == 0) return false;
    if (r > 0)
      got += static_cast<size_t>(r);
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return false;
  }
  return true;
}

std::string client_proof(const std::string& token, const std::string& cw, const std::string& cp) {
  return hmac_sha256(token, "kernelskill-gpu client\n" + cw + cp);
}
std::string worker_proof(const std::string& token, const std::string& cw, const std::string& cp) {
  return hmac_sha256(token, "kernelskill-gpu worker\n" + cp + cw);
}

// Refused peers: a line for each address's first refusal in a minute, the rest counted
// (a flood wrote a line per connection).
refusal_log& refusals() {
  static refusal_log log(std::chrono::seconds(60), 20,
                         [](const std::string& line) { spdlog::warn("worker port: {}", line); });
  return log;
}

std::string peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "a peer";
  auto x = net::remote_addr_of_fd(fd);
  auto p = net::remote_port_of_fd(fd);
  return (x ? *x : std::string("?")) + ":" + (p ? std::to_string(*p) : std::string("?"));
}

// The worker's side: the challenges Cw‖Cp (TLS's key is bound to them) when the peer
// proved the token, else nothing and `why` says how it failed (for the refusal log).
std::optional<std::string> worker_handshake(int fd, const std::string& token, clock::time_point deadline,
                                            std::string& why) {
  // A failed read before the deadline: the peer closed or reset the connection.
  auto broke_off = [&] {
    why = clock::now() < deadline ? "it closed the connection without proving the token (a KernelSkill from before "
                                    "encrypted links does so: run the same version on both sides)"
                                  : "it did not prove the token in time";
    return std::nullopt;
  };
  const std::string cw = random_bytes(kChallenge);
  if (!send_all(fd, kMagic + cw, deadline)) return broke_off();
  std::string reply;
  if (!recv_exact(fd, kMagic.size() + kChallenge + kProof, reply, deadline)) return broke_off();
  const std::string cp = reply.substr(kMagic.size(), kChallenge);
  if (reply.compare(0, kMagic.size(), kOldMagic) == 0) {
    why =
        "it did not prove the token: it speaks the handshake of a KernelSkill from before encrypted "
        "links (KSW1); run the same version on both sides";
    send_all(fd, std::string(1, '\0'), deadline);
    return std::nullopt;
  }
  const bool proved = reply.compare(0, kMagic.size(), kMagic) == 0 &&
                      equal_secrets(reply.substr(kMagic.size() + kChallenge), client_proof(token, cw, cp));
  if (!proved) {
    why = "it did not prove the token: its proof is wrong";
    send_all(fd, std::string(1, '\0'), deadline);
    return std::nullopt;
  }
  if (!send_all(fd, std::string(1, '\1') + worker_proof(token, cw, cp), deadline)) return broke_off();
  return cw + cp;
}

// The peer's side: whether the link may go on (with TLS when `binding` is set: the
// challenges Cw‖Cp), else why not.
struct peer_verdict {
  std::string refused;  // empty: go on
  std::string binding;  // set when the worker asked for the token and the handshake passed
};

peer_verdict peer_handshake(int fd, const std::string& token, const std::string& where, clock::time_point deadline) {
  auto refuse = [](std::string why) { return peer_verdict{std::move(why), {}}; };
  // The worker speaks first: the handshake's magic, or CAF's own greeting.
  char head[4] = {0};
  ssize_t seen = 0;
  while (seen < 4) {
    if (!wait_for_socket(fd, POLLIN, deadline)) return refuse("the worker at " + where + " did not answer in time");
    seen = ::recv(fd, head, 4, MSG_PEEK | MSG_DONTWAIT);
    if (seen == 0) return refuse("the worker at " + where + " closed the connection");
    if (seen < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return refuse("the connection to " + where + " failed");
    if (seen > 0 && seen < 4) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (std::string(head, 4) == kOldMagic)
    return refuse("the worker at " + where + " is an older kernelskill-gpu whose link is not encrypted; " +
                  "run the same KernelSkill version on both sides");
  const bool asks = std::string(head, 4) == kMagic;
  if (!asks && token.empty()) return {};
  if (!asks)
    return refuse("the worker at " + where + " does not ask for a token, so anyone who reaches it may use it; " +
                  "start it with a token (kernelskill-gpu --listen ... --token-file F), or give this side none");
  if (token.empty())
    return refuse("the worker at " + where + " asks for a token and none is set here (gpus.remote_token_file, " +
                  "or the variable gpus.remote_token_env names: KS_WORKER_TOKEN by default)");
  std::string hello;
  if (!recv_exact(fd, kMagic.size() + kChallenge, hello, deadline))
    return refuse("the worker at " + where + " broke off the handshake");
  const std::string cw = hello.substr(kMagic.size());
  const std::string cp = random_bytes(kChallenge);
  if (!send_all(fd, kMagic + cp + client_proof(token, cw, cp), deadline))
    return refuse("the worker at " + where + " broke off the handshake");
  std::string verdict;
  if (!recv_exact(fd, 1, verdict, deadline) || verdict[0] != '\1')
    return refuse("the worker at " + where + " refused the token given here");
  std::string proof;
  if (!recv_exact(fd, kProof, proof, deadline) || !equal_secrets(proof, worker_proof(token, cw, cp)))
    return refuse("the worker at " + where + " does not know the token given here (is it the worker you meant?)");
  return {"", cw + cp};
}

// CAF's scribe on the plain end of an encrypted link (a Unix socket): it names the TCP
// peer behind the relay, where CAF would ask the Unix socket (and abort on its
// address family, whose port it cannot read).
class relayed_scribe : public net::scribe_impl {
 public:
  relayed_scribe(net::default_multiplexer& mx, net::native_socket plain, std::string addr, uint16_t port)
      : net::scribe_impl(mx, plain), addr_(std::move(addr)), port_(port) {}
  std::string addr() const override { return addr_; }
  uint16_t port() const override { return port_; }

 private:
  std::string addr_;
  uint16_t port_;
};

// The address and port CAF would give the TCP connection `fd`.
std::pair<std::string, uint16_t> tcp_peer(int fd) {
  auto a = net::remote_addr_of_fd(fd);
  auto p = net::remote_port_of_fd(fd);
  return {a ? *a : std::string(), p ? *p : uint16_t{0}};
}

// Connections whose handshake is under way (oldest first), and whether their doorman
// is still there to take the ones that pass: handshake threads never touch a doorman
// that is gone.
struct gate {
  std::mutex mu;
  caf::io::doorman* door = nullptr;
  std::deque<int> pending;
};

// CAF's TCP doorman, but an accepted connection goes to the broker only once its peer
// has proved the token (on a thread of its own, so a slow peer holds no one else).
class token_doorman : public net::doorman_impl {
 public:
  token_doorman(net::default_multiplexer& mx, net::native_socket fd, std::string token)
      : net::doorman_impl(mx, fd), token_(std::move(token)), gate_(std::make_shared<gate>()) {
    gate_->door = this;
  }
  ~token_doorman() override {
    std::lock_guard lock(gate_->mu);
    gate_->door = nullptr;
  }

  bool new_connection() override {
    if (detached()) return false;
    const int fd = acceptor_.accepted_socket();
    net::child_process_inherit(fd, false);
    {
      // Room for one more handshake: the oldest under way is cut short (its peer has had
      // the most time), so silent peers cannot keep the daemon out.
      std::lock_guard lock(gate_->mu);
      if (gate_->pending.size() >= kMaxHandshakes) {
        ::shutdown(gate_->pending.front(), SHUT_RDWR);
        gate_->pending.pop_front();
      }
      gate_->pending.push_back(fd);
    }
    net::nonblocking(fd, true);
    std::thread([g = gate_, token = token_, fd] {
      const std::string peer = peer_of(fd);
      const auto address = net::remote_addr_of_fd(fd);
      const auto [addr, port] = tcp_peer(fd);
      // The token's proof, then TLS keyed by it, within one deadline.
      const auto deadline = clock::now() + kWorkerWait;
      std::string why;
      auto binding = worker_handshake(fd, token, deadline, why);
      bool cut = false;
      {
        // Only peers that proved the token go on to TLS: they leave the handshakes the
        // 16 count (and the relay may close fd once it has it).
        std::lock_guard lock(g->mu);
        if (auto it = std::find(g->pending.begin(), g->pending.end(), fd); it != g->pending.end())
          g->pending.erase(it);
        else
          cut = true;  // new_connection() shut it down to make room
      }
      if (!binding) {
        if (cut)
          why = "it did not prove the token before " + std::to_string(kMaxHandshakes) +
                " newer connections arrived (the oldest handshake is cut short)";
        refusals().refused(address ? *address : peer, peer, why);
        ::close(fd);
        return;
      }
      auto plain = encrypt_link(fd, tls_side::worker, token, *binding, deadline);
      if (!plain) {
        refusals().refused(address ? *address : peer, peer, "it proved the token, then " + plain.message());
        ::close(fd);
        return;
      }
      // fd is the relay's now; CAF gets the plain end.
      std::lock_guard lock(g->mu);
      if (!g->door) {
        ::close(*plain);
        return;
      }
      static_cast<token_doorman*>(g->door)->mux().post([g, fd = *plain, addr = addr, port = port] {
        std::lock_guard inner(g->mu);
        auto* door = static_cast<token_doorman*>(g->door);
        if (!door || door->detached()) {
          ::close(fd);
          return;
        }
        door->admit(fd, addr, port);
      });
    }).detach();
    return true;
  }

 private:
  net::default_multiplexer& mux() { return acceptor_.backend(); }

  // On the multiplexer's thread: the connection is CAF's from now on (its plain end;
  // the relay keeps the TCP socket).
  void admit(int plain, const std::string& addr, uint16_t port) {
    auto& mx = acceptor_.backend();
    caf::io::scribe_ptr scribe = caf::make_counted<relayed_scribe>(mx, plain, addr, port);
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    doorman::new_connection(&mx, hdl);
  }

  std::string token_;
  std::shared_ptr<gate> gate_;
};

// CAF's middleman actor for worker links: listens through token_doorman and connects
// through the peer's handshake. `why` receives the reason a connect failed.
class worker_link_actor : public caf::io::middleman_actor_impl {
 public:
  worker_link_actor(caf::actor_config& cfg, caf::actor broker, std::string token, std::shared_ptr<std::string> why,
                    double timeout_s)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)),
        token_(std::move(token)),
        why_(std::move(why)),
        timeout_s_(timeout_s) {}

  const char* name() const override { return "ks_worker_link"; }

 protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    const std::string where = host + ":" + std::to_string(port);
    auto fd = net::new_tcp_connection(host, port);
    if (!fd) {
      *why_ = "cannot connect to " + where + ": " + system().render(fd.error());
      return caf::make_error(caf::sec::cannot_connect_to_node);
    }
    net::child_process_inherit(*fd, false);
    net::nonblocking(*fd, true);
    const auto deadline = clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
    auto verdict = peer_handshake(*fd, token_, where, deadline);
    if (!verdict.refused.empty()) {
      *why_ = verdict.refused;
      ::close(*fd);
      return caf::make_error(caf::sec::cannot_connect_to_node);
    }
    if (verdict.binding.empty()) return mpx().new_scribe(*fd);  // no token: loopback, in clear
    const auto peer = tcp_peer(*fd);
    auto plain = encrypt_link(*fd, tls_side::peer, token_, verdict.binding, deadline);
    if (!plain) {
      *why_ = "the worker at " + where + " proved the token, then " + plain.message();
      ::close(*fd);
      return caf::make_error(caf::sec::cannot_connect_to_node);
    }
    // *fd is the relay's now; CAF gets the plain end.
    return caf::io::scribe_ptr{caf::make_counted<relayed_scribe>(mpx(), *plain, peer.first, peer.second)};
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto fd = net::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    if (token_.empty()) return mpx().new_doorman(*fd);
    return caf::make_counted<token_doorman>(mpx(), *fd, token_);
  }

 private:
  net::default_multiplexer& mpx() { return static_cast<net::default_multiplexer&>(system().middleman().backend()); }

  std::string token_;
  std::shared_ptr<std::string> why_;
  double timeout_s_;
};

caf::actor spawn_link(caf::actor_system& sys, const std::string& token, std::shared_ptr<std::string> why,
                      double timeout_s) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return caf::actor_cast<caf::actor>(
      sys.spawn<worker_link_actor, caf::detached + caf::hidden>(std::move(basp), token, std::move(why), timeout_s));
}

}  // namespace

void set_refusal_log_interval(std::chrono::milliseconds interval) { refusals().set_interval(interval); }

result<uint16_t> publish_guarded(caf::actor_system& sys, caf::strong_actor_ptr actor, std::set<std::string> ifs,
                                 const std::string& host, uint16_t port, const std::string& token) {
  if (token.empty() && !is_loopback_host(host))
    return error{host +
                 " is not a loopback address: a worker serving beyond this machine needs a "
                 "token (--token-file F, or $KS_WORKER_TOKEN), or anyone who reaches it runs "
                 "code on its GPU"};
  auto why = std::make_shared<std::string>();
  auto link = spawn_link(sys, token, why, 30);
  caf::scoped_actor self{sys};
  result<uint16_t> out = error{"no answer"};
  self->request(link, caf::infinite, caf::publish_atom_v, port, std::move(actor), std::move(ifs), host, true)
      .receive([&](uint16_t bound) { out = bound; }, [&](caf::error& err) { out = error{sys.render(err)}; });
  // The doorman belongs to the broker now; the link actor is not needed any more.
  self->send_exit(link, caf::exit_reason::user_shutdown);
  return out;
}

result<uint16_t> publish_worker(caf::actor_system& sys, const gpu_worker_actor& worker, const std::string& host,
                                uint16_t port, const std::string& token) {
  return publish_guarded(sys, caf::actor_cast<caf::strong_actor_ptr>(worker), sys.message_types(worker), host, port,
                         token);
}

caf::actor spawn_guarded_connector(caf::actor_system& sys, const std::string& token, std::shared_ptr<std::string> why,
                                   double timeout_s) {
  return spawn_link(sys, token, std::move(why), timeout_s);
}

result<gpu_worker_actor> connect_worker(caf::actor_system& sys, const std::string& host, uint16_t port,
                                        const std::string& token, double timeout_s) {
  auto why = std::make_shared<std::string>();
  auto link = spawn_link(sys, token, why, timeout_s);
  caf::scoped_actor self{sys};
  result<gpu_worker_actor> out = error{"no answer"};
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000) + 5000);
  self->request(link, wait, caf::connect_atom_v, host, port)
      .receive(
          [&](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            if (!ptr)
              out = error{"nothing is published at " + host + ":" + std::to_string(port)};
            else if (!sys.assignable(ifs, sys.message_types<gpu_worker_actor>()))
              out = error{"what listens at " + host + ":" + std::to_string(port) +
                          " is not a kernelskill-gpu worker of this version"};
            else
              out = caf::actor_cast<gpu_worker_actor>(std::move(ptr));
          },
          [&](caf::error& err) { out = error{why->empty() ? sys.render(err) : *why}; });
  self->send_exit(link, caf::exit_reason::user_shutdown);
  return out;
}

}  // namespace ks
