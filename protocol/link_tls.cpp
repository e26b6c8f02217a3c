#include "protocol/link_tls.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

#include "protocol/socket_wait.hpp"
#include "protocol/tls_relay.hpp"

namespace ks {

namespace {

constexpr char kIdentity[] = "kernelskill-worker-link";
constexpr char kInfo[] = "kernelskill worker link: TLS 1.3 PSK";
constexpr size_t kKey = 32;                       // SHA-256's size: the suite's hash
constexpr unsigned char kSuite[] = {0x13, 0x01};  // TLS_AES_128_GCM_SHA256

// A socket BIO of our own: OpenSSL's writes with write(2), which raises SIGPIPE when the
// peer has reset the connection; this one sends with MSG_NOSIGNAL.
int sock_of(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::send(sock_of(b), data, static_cast<size_t>(len), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(b);
  return -1;
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::recv(sock_of(b), data, static_cast<size_t>(len), MSG_DONTWAIT);
  if (n >= 0) return static_cast<int>(n);  // 0: the peer closed
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(b);
  return -1;
}

long bio_ctrl(BIO* b, int cmd, long, void* ptr) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing is buffered here
    case BIO_C_GET_FD:
      if (ptr) *static_cast<int*>(ptr) = sock_of(b);
      return sock_of(b);
    default:
      return 0;
  }
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* x =
        BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "kernelskill link socket");
    if (x) {
      BIO_meth_set_write(x, bio_write);
      BIO_meth_set_read(x, bio_read);
      BIO_meth_set_ctrl(x, bio_ctrl);
    }
    return x;
  }();
  return m;
}

// The session that carries the PSK (the handshake's key, in the SSL's app data).
SSL_SESSION* psk_session(SSL* ssl) {
  const auto* key = static_cast<const std::string*>(SSL_get_app_data(ssl));
  const SSL_CIPHER* suite = SSL_CIPHER_find(ssl, kSuite);
  if (!key || !suite) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s && SSL_SESSION_set1_master_key(s, reinterpret_cast<const unsigned char*>(key->data()), key->size()) &&
      SSL_SESSION_set_cipher(s, suite) && SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION))
    return s;
  SSL_SESSION_free(s);
  return nullptr;
}

// The peer (client) offers the PSK.
int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* id_len, SSL_SESSION** sess) {
  *sess = nullptr;
  *id = nullptr;
  *id_len = 0;
  const SSL_CIPHER* suite = SSL_CIPHER_find(ssl, kSuite);
  if (!suite) return 0;
  // After a HelloRetryRequest, only a PSK for the chosen suite's hash may be offered.
  if (md && EVP_MD_get_type(md) != EVP_MD_get_type(SSL_CIPHER_get_handshake_digest(suite))) return 1;
  *sess = psk_session(ssl);
  if (!*sess) return 0;
  *id = reinterpret_cast<const unsigned char*>(kIdentity);
  *id_len = sizeof kIdentity - 1;
  return 1;
}

// The worker (server) accepts only its identity, with the key it derived itself: a
// peer whose key differs fails the PSK binder's check.
int find_psk(SSL* ssl, const unsigned char* id, size_t id_len, SSL_SESSION** sess) {
  *sess = nullptr;
  if (id_len != sizeof kIdentity - 1 || std::memcmp(id, kIdentity, id_len) != 0) return 1;
  *sess = psk_session(ssl);
  return *sess ? 1 : 0;
}

SSL_CTX* make_context(tls_side side) {
  SSL_CTX* ctx = SSL_CTX_new(side == tls_side::worker ? TLS_server_method() : TLS_client_method());
  if (!ctx) return nullptr;
  const bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) &&
                  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) &&
                  SSL_CTX_set_ciphersuites(ctx, link_cipher_suite);
  if (!ok) {
    SSL_CTX_free(ctx);
    return nullptr;
  }
  // The relay retries a write with what is left, from a buffer that may have moved.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_max_early_data(ctx, 0);
  // Read what the socket has, not a record's header and then its body: half the reads.
  // (The relay asks TLS for more until it says it must wait, so nothing read ahead
  // waits unseen.)
  SSL_CTX_set_read_ahead(ctx, 1);
  if (side == tls_side::worker)
    SSL_CTX_set_psk_find_session_callback(ctx, find_psk);
  else
    SSL_CTX_set_psk_use_session_callback(ctx, use_psk);
  return ctx;
}

SSL_CTX* context(tls_side side) {
  static SSL_CTX* contexts[2] = {nullptr, nullptr};
  static std::once_flag once;
  std::call_once(once, [] {
    // No configuration file: the sandboxed worker cannot read /etc/ssl, and the link
    // must not depend on one.
    OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
    contexts[0] = make_context(tls_side::worker);
    contexts[1] = make_context(tls_side::peer);
  });
  return contexts[side == tls_side::worker ? 0 : 1];
}

// HKDF-SHA256(salt = binding, key = token, info = kInfo).
std::string derive_key(const std::string& token, const std::string& binding) {
  std::string out(kKey, '\0');
  size_t len = out.size();
  EVP_PKEY_CTX* kdf = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  const bool ok = kdf && EVP_PKEY_derive_init(kdf) > 0 && EVP_PKEY_CTX_set_hkdf_md(kdf, EVP_sha256()) > 0 &&
                  EVP_PKEY_CTX_set1_hkdf_salt(kdf, reinterpret_cast<const unsigned char*>(binding.data()),
                                              static_cast<int>(binding.size())) > 0 &&
                  EVP_PKEY_CTX_set1_hkdf_key(kdf, reinterpret_cast<const unsigned char*>(token.data()),
                                             static_cast<int>(token.size())) > 0 &&
                  EVP_PKEY_CTX_add1_hkdf_info(kdf, reinterpret_cast<const unsigned char*>(kInfo),
                                              static_cast<int>(sizeof kInfo - 1)) > 0 &&
                  EVP_PKEY_derive(kdf, reinterpret_cast<unsigned char*>(out.data()), &len) > 0 && len == kKey;
  EVP_PKEY_CTX_free(kdf);
  if (!ok) out.clear();
  return out;
}

// OpenSSL's reason for the last failure, in words.
std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  return r ? r : "no reason given";
}

}  // namespace

result<int> encrypt_link(int fd, tls_side side, const std::string& token, const std::string& binding,
                         std::chrono::steady_clock::time_point deadline) {
  SSL_CTX* ctx = context(side);
  // CAF sets these on the sockets it is given; it is given the Unix end now. Without
  // TCP_NODELAY a small message would wait for the previous one's acknowledgement.
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  if (!ctx) return error{"cannot set up TLS 1.3 (" + openssl_reason() + ")"};
  std::string key = derive_key(token, binding);
  if (key.empty()) return error{"cannot derive the link's key (" + openssl_reason() + ")"};
  SSL* ssl = SSL_new(ctx);
  BIO* bio = socket_method() ? BIO_new(socket_method()) : nullptr;
  if (!ssl || !bio) {
    BIO_free(bio);
    SSL_free(ssl);
    OPENSSL_cleanse(key.data(), key.size());
    return error{"cannot set up TLS 1.3 (" + openssl_reason() + ")"};
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);  // the SSL owns the BIO; the BIO does not close fd
  SSL_set_app_data(ssl, &key);
  std::string failure;
  for (;;) {
    ERR_clear_error();
    const int r = side == tls_side::worker ? SSL_accept(ssl) : SSL_connect(ssl);
    if (r == 1) break;
    const int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      if (!wait_for_socket(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        failure = "the TLS handshake did not finish in time";
        break;
      }
      continue;
    }
    failure = e == SSL_ERROR_SSL ? "the TLS handshake failed (" + openssl_reason() + ")"
                                 : "the connection closed during the TLS handshake";
    break;
  }
  SSL_set_app_data(ssl, nullptr);
  OPENSSL_cleanse(key.data(), key.size());
  if (!failure.empty()) {
    SSL_free(ssl);
    return error{failure};
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
    const int err = errno;
    SSL_free(ssl);
    return error{std::string("cannot make the link's socket pair: ") + std::strerror(err)};
  }
  relay_tls(ssl, fd, pair[1]);
  return pair[0];
}

}  // namespace ks
