#include <catch2/catch.hpp>

#include <string>

#include "base/content_hash.hpp"
#include "base/shared_bytes.hpp"

// The FIPS 180-4 / NIST example vectors.
TEST_CASE("sha256_hex matches the standard test vectors", "[hash]") {
  using ks::sha256_hex;
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the padding boundary (55, 56, 64 bytes) take different paths.
  CHECK(sha256_hex(std::string(55, 'x')) != sha256_hex(std::string(56, 'x')));
  CHECK(sha256_hex(std::string(64, 'x')).size() == 64);
}

TEST_CASE("shared bytes hash once for all their copies", "[hash]") {
  const std::string text = "weights of a network";
  ks::shared_bytes a(text);
  ks::shared_bytes b = a;
  CHECK(a.sha256_hex() == ks::sha256_hex(text));
  CHECK(&a.sha256_hex() == &b.sha256_hex());  // one digest, kept with the bytes
  CHECK(ks::shared_bytes().sha256_hex() == ks::sha256_hex(""));
  ks::shared_bytes other(text);  // equal bytes, another buffer: the same digest
  CHECK(other.sha256_hex() == a.sha256_hex());
}
