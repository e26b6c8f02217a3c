// base/secret.hpp: HMAC-SHA256 and base32 against their RFCs' test vectors, random
// bytes that differ, constant-time comparison, and shared tokens from files and the
// environment with the refusals that keep them secret.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "base/secret.hpp"

using namespace ks;
using Catch::Contains;

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("HMAC-SHA256 gives RFC 4231's values", "[secret]") {
  // Test case 1: key 0x0b x 20, "Hi There".
  CHECK(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: key "Jefe".
  CHECK(hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block (131 bytes of 0xaa) is hashed first.
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("base32 is RFC 4648's alphabet, lowercase and unpadded", "[secret]") {
  CHECK(base32_lower("") == "");
  CHECK(base32_lower("f") == "my");
  CHECK(base32_lower("fo") == "mzxq");
  CHECK(base32_lower("foobar") == "mzxw6ytboi");
  CHECK(base32_lower(std::string(16, '\xff')).size() == 26);
}

TEST_CASE("random bytes do not repeat", "[secret]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) CHECK(seen.insert(random_bytes(16)).second);
  CHECK(random_bytes(0).empty());
  CHECK(random_bytes(100).size() == 100);
}

TEST_CASE("secrets compare equal only when they are", "[secret]") {
  CHECK(equal_secrets("abc", "abc"));
  CHECK_FALSE(equal_secrets("abc", "abd"));
  CHECK_FALSE(equal_secrets("abc", "abcd"));
  CHECK_FALSE(equal_secrets("", "x"));
  CHECK(equal_secrets("", ""));
}

TEST_CASE("a shared token comes from a private file or the environment, never a short one", "[secret]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ks-secret-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "token";
  std::ofstream(file) << "a-token-of-24-characters\n";
  ::chmod(file.c_str(), 0600);
  auto t = read_shared_token(file.string(), "", "--token-file");
  REQUIRE(t);
  CHECK(*t == "a-token-of-24-characters");

  ::chmod(file.c_str(), 0640);
  auto loose = read_shared_token(file.string(), "", "--token-file");
  REQUIRE_FALSE(loose);
  CHECK_THAT(loose.message(), Contains("chmod 600") && Contains("--token-file"));
  CHECK_THAT(loose.message(), !Contains("a-token-of-24"));

  std::ofstream(file, std::ios::trunc) << "short\n";
  ::chmod(file.c_str(), 0600);
  auto shortish = read_shared_token(file.string(), "", "--token-file");
  REQUIRE_FALSE(shortish);
  CHECK_THAT(shortish.message(), Contains("at least 16"));
  CHECK_THAT(shortish.message(), !Contains("short\n"));

  std::ofstream(file, std::ios::trunc) << "\n";
  auto empty = read_shared_token(file.string(), "", "--token-file");
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.message(), Contains("holds no token"));

  auto missing = read_shared_token((dir / "absent").string(), "", "gpus.remote_token_file");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.message(), Contains("gpus.remote_token_file") && Contains("does not exist"));

  // The environment, when no file is named; unset means no token.
  ::setenv("KS_SECRET_TEST_TOKEN", "an-env-token-of-22-chars  ", 1);
  auto env = read_shared_token("", "KS_SECRET_TEST_TOKEN", "x");
  REQUIRE(env);
  CHECK(*env == "an-env-token-of-22-chars");
  ::unsetenv("KS_SECRET_TEST_TOKEN");
  auto none = read_shared_token("", "KS_SECRET_TEST_TOKEN", "x");
  REQUIRE(none);
  CHECK(none->empty());

  // "~/" is the home directory.
  const char* home = std::getenv("HOME");
  const std::string saved = home ? home : "";
  ::setenv("HOME", dir.c_str(), 1);
  std::ofstream(file, std::ios::trunc) << "a-token-of-24-characters\n";
  auto tilde = read_shared_token("~/token", "", "x");
  if (home)
    ::setenv("HOME", saved.c_str(), 1);
  else
    ::unsetenv("HOME");
  REQUIRE(tilde);
  CHECK(*tilde == "a-token-of-24-characters");
  std::filesystem::remove_all(dir);
}
