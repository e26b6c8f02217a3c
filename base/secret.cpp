#include "base/secret.hpp"

#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "base/content_hash.hpp"

namespace ks {

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::fprintf(stderr,
                   "kernelskill: cannot read the kernel's random generator (getrandom); "
                   "refusing to make a guessable secret\n");
      std::abort();
    }
    got += static_cast<size_t>(r);
  }
  return out;
}

std::string base32_lower(std::string_view bytes) {
  static const char* alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(buffer << (5 - bits)) & 31];
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  std::string k = key.size() > 64 ? sha256_bytes(key) : std::string(key);
  k.resize(64, '\0');
  std::string inner(64, '\0'), outer(64, '\0');
  for (size_t i = 0; i < 64; ++i) {
    inner[i] = static_cast<char>(k[i] ^ 0x36);
    outer[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  return sha256_bytes(outer + sha256_bytes(inner + std::string(message)));
}

bool equal_secrets(std::string_view a, std::string_view b) {
  // Every byte of the longer is looked at, and the lengths are compared in the same pass.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

constexpr size_t kMinTokenLength = 16;

std::string trimmed(std::string token) {
  while (!token.empty() &&
         (token.back() == '\r' || token.back() == ' ' || token.back() == '\t' || token.back() == '\n'))
    token.pop_back();
  return token;
}

result<std::string> read_token_file(const std::string& file, const std::string& what) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return error{what + ": cannot read " + file + " (it does not exist)"};
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return error{what + ": " + file + " may be read by other users; a token file must be its " +
                 "owner's alone (chmod 600 " + file + ")"};
  std::ifstream in(file, std::ios::binary);
  if (!in) return error{what + ": cannot read " + file};
  std::string token;
  std::getline(in, token);
  token = trimmed(std::move(token));
  if (token.empty()) return error{what + ": " + file + " holds no token (its first line is empty)"};
  return token;
}

}  // namespace

result<std::string> read_shared_token(const std::string& file, const std::string& env_name, const std::string& what) {
  std::string token;
  if (!file.empty()) {
    // "~/x" as a shell would read it: configs name files in the home directory so.
    std::string path = file;
    if (path.rfind("~/", 0) == 0)
      if (const char* home = std::getenv("HOME")) path = std::string(home) + path.substr(1);
    auto read = read_token_file(path, what);
    if (!read) return read;
    token = std::move(*read);
  } else if (!env_name.empty()) {
    if (const char* v = std::getenv(env_name.c_str())) token = trimmed(v);
  }
  // A short secret can be guessed one connection at a time.
  if (!token.empty() && token.size() < kMinTokenLength)
    return error{what + ": the token " + (file.empty() ? "in $" + env_name : "in " + file) + " has " +
                 std::to_string(token.size()) + " characters; use at least " + std::to_string(kMinTokenLength) +
                 " (for example: head -c 24 /dev/urandom | base64)"};
  return token;
}

}  // namespace ks
