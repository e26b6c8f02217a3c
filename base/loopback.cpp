#include "base/loopback.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace ks {

namespace {

bool is_loopback_address(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(a);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
  }
  return false;
}

}  // namespace

bool is_loopback_host(const std::string& host_in) {
  std::string host = host_in;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return false;
  // Decided by what the name resolves to, every address of it: "127.example.com" is a
  // name like any other, and a name that resolves to no address is not loopback.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return false;
  bool all_loopback = true;
  for (addrinfo* a = found; a; a = a->ai_next) all_loopback = all_loopback && is_loopback_address(a->ai_addr);
  ::freeaddrinfo(found);
  return all_loopback;
}

bool is_loopback_name(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace ks
