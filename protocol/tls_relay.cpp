#include "protocol/tls_relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace ks {

namespace {

constexpr size_t kBuffer = 64 * 1024;  // per direction and link
// How long a link CAF has closed may take to send what CAF wrote before closing, when
// its peer does not read (a stopped node): then it is closed with the rest unsent.
constexpr auto kLinger = std::chrono::seconds(30);
using clock = std::chrono::steady_clock;

// One link: TLS on `tcp`, plain bytes on `plain` (CAF holds the other end).
struct link {
  SSL* ssl;
  int tcp;
  int plain;
  std::vector<char> down = std::vector<char>(kBuffer);  // decrypted, for CAF
  size_t down_off = 0, down_len = 0;
  std::vector<char> up = std::vector<char>(kBuffer);  // CAF's, to encrypt
  size_t up_off = 0, up_len = 0;
  bool tcp_eof = false;                                       // the peer closed (or TLS failed): nothing more to read
  bool tls_broken = false;                                    // TLS failed (a reset, a bad record): no more TLS at all
  bool plain_eof = false;                                     // CAF closed its end
  bool plain_broken = false;                                  // CAF's socket cannot be written any more
  short tcp_events = 0, plain_events = 0;                     // what the link waits for
  clock::time_point linger_until = clock::time_point::max();  // set once CAF has closed

  link(SSL* s, int t, int p) : ssl(s), tcp(t), plain(p) {}
  ~link() {
    // CAF closed its side and TLS still works: tell the peer (close_notify, not
    // waiting for its answer).
    if (plain_eof && !tls_broken && !tcp_eof) {
      ERR_clear_error();
      (void)SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    ::close(tcp);
    ::close(plain);
  }
};

// Moves what can move without waiting; false once the link is over.
bool pump(link& l) {
  for (;;) {
    bool progress = false;
    l.tcp_events = l.plain_events = 0;
    // The peer's bytes, decrypted, to CAF: as many records as are there and fit (one
    // send to CAF for several records).
    if (l.down_off == l.down_len) l.down_off = l.down_len = 0;
    while (l.down_len < l.down.size() && !l.tcp_eof) {
      ERR_clear_error();
      const int n = SSL_read(l.ssl, l.down.data() + l.down_len, static_cast<int>(l.down.size() - l.down_len));
      if (n > 0) {
        l.down_len += static_cast<size_t>(n);
        progress = true;
        continue;
      }
      switch (SSL_get_error(l.ssl, n)) {
        case SSL_ERROR_WANT_READ:
          l.tcp_events |= POLLIN;
          break;
        case SSL_ERROR_WANT_WRITE:
          l.tcp_events |= POLLOUT;
          break;
        case SSL_ERROR_ZERO_RETURN:
          l.tcp_eof = true;
          progress = true;
          break;  // close_notify
        default:
          l.tcp_eof = l.tls_broken = true;
          progress = true;
          break;  // reset, EOF, bad record
      }
      break;
    }
    if (l.down_off < l.down_len) {
      const ssize_t n =
          ::send(l.plain, l.down.data() + l.down_off, l.down_len - l.down_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        l.down_off += static_cast<size_t>(n);
        progress = true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        l.plain_events |= POLLOUT;
      } else if (errno != EINTR) {
        l.plain_eof = l.plain_broken = true;
      }
    }
    // CAF's bytes, encrypted, to the peer.
    if (l.up_off == l.up_len && !l.plain_eof) {
      const ssize_t n = ::recv(l.plain, l.up.data(), l.up.size(), MSG_DONTWAIT);
      if (n > 0) {
        l.up_off = 0;
        l.up_len = static_cast<size_t>(n);
        progress = true;
      } else if (n == 0) {
        l.plain_eof = true;
        progress = true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        l.plain_events |= POLLIN;
      } else if (errno != EINTR) {
        l.plain_eof = true;
        progress = true;
      }
    }
    if (l.up_off < l.up_len && !l.tls_broken) {
      ERR_clear_error();
      // Partial writes are on (link_tls.cpp): n is what went out, a record or more.
      const int n = SSL_write(l.ssl, l.up.data() + l.up_off, static_cast<int>(l.up_len - l.up_off));
      if (n > 0) {
        l.up_off += static_cast<size_t>(n);
        progress = true;
      } else {
        switch (SSL_get_error(l.ssl, n)) {
          case SSL_ERROR_WANT_WRITE:
            l.tcp_events |= POLLOUT;
            break;
          case SSL_ERROR_WANT_READ:
            l.tcp_events |= POLLIN;
            break;
          default:
            l.tcp_eof = l.tls_broken = true;
            progress = true;
            break;
        }
      }
    }
    if (l.plain_broken) return false;
    if (l.tcp_eof && l.down_off == l.down_len) return false;
    if (l.plain_eof && (l.up_off == l.up_len || l.tls_broken)) return false;
    if (l.plain_eof && l.linger_until == clock::time_point::max()) l.linger_until = clock::now() + kLinger;
    if (!progress) return true;
  }
}

class relay {
 public:
  relay() {
    // OpenSSL first: its exit handler is then registered before this object's
    // destructor, which therefore runs (and joins the thread) before OpenSSL cleans up.
    OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    thread_ = std::thread([this] { run(); });
  }
  ~relay() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    poke();
    if (thread_.joinable()) thread_.join();
    for (int fd : wake_)
      if (fd >= 0) ::close(fd);
  }

  void add(SSL* ssl, int tcp, int plain) {
    {
      std::lock_guard lock(mu_);
      incoming_.push_back(std::make_unique<link>(ssl, tcp, plain));
    }
    count_.fetch_add(1);
    poke();
  }

  size_t count() const { return count_.load(); }

 private:
  void poke() {
    const char c = 1;
    if (wake_[1] >= 0) (void)!::write(wake_[1], &c, 1);
  }

  void run() {
    std::vector<std::unique_ptr<link>> links;
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      // A side the link does not wait on is left out (fd -1): a hung-up socket would
      // otherwise wake the loop while the link waits for its other side.
      for (auto& l : links) {
        fds.push_back({l->tcp_events ? l->tcp : -1, l->tcp_events, 0});
        fds.push_back({l->plain_events ? l->plain : -1, l->plain_events, 0});
      }
      // Until the first lingering link's time is up (none: no timeout).
      auto next = clock::time_point::max();
      for (auto& l : links) next = std::min(next, l->linger_until);
      int timeout_ms = -1;
      if (next != clock::time_point::max())
        timeout_ms = static_cast<int>(std::clamp<int64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(next - clock::now()).count() + 1, 0, 60000));
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
        if (errno == EINTR) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EAGAIN/ENOMEM: try again
        continue;
      }
      const size_t waited = links.size();
      std::vector<bool> over(links.size(), false);
      const auto now = clock::now();
      for (size_t i = 0; i < waited; ++i) {
        if (fds[1 + 2 * i].revents || fds[2 + 2 * i].revents) over[i] = !pump(*links[i]);
        if (links[i]->linger_until <= now) over[i] = true;
      }
      if (fds[0].revents) {
        char drain[64];
        while (::read(wake_[0], drain, sizeof drain) > 0) {
        }
        std::vector<std::unique_ptr<link>> fresh;
        {
          std::lock_guard lock(mu_);
          if (stop_) break;
          fresh.swap(incoming_);
        }
        for (auto& l : fresh) {
          // A new link may already hold bytes (TLS read ahead, CAF's first message).
          over.push_back(!pump(*l));
          links.push_back(std::move(l));
        }
      }
      size_t kept = 0;
      for (size_t i = 0; i < links.size(); ++i) {
        if (over[i]) {
          links[i].reset();
          count_.fetch_sub(1);
        } else {
          links[kept++] = std::move(links[i]);
        }
      }
      links.resize(kept);
    }
    // Stopping (the process exits): the links close with it.
    count_.fetch_sub(links.size());
    links.clear();
    std::lock_guard lock(mu_);
    count_.fetch_sub(incoming_.size());
    incoming_.clear();
  }

  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::unique_ptr<link>> incoming_;
  bool stop_ = false;
  std::atomic<size_t> count_{0};
};

relay& the_relay() {
  static relay r;
  return r;
}

}  // namespace

void relay_tls(ssl_st* ssl, int tcp_fd, int plain_fd) { the_relay().add(ssl, tcp_fd, plain_fd); }

size_t relayed_links() { return the_relay().count(); }

}  // namespace ks
