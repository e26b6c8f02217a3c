#pragma once
// SHA-256 (FIPS 180-4), for content addressing: cache keys of compiled kernels and
// ids of stored candidates. Implemented here so that neither the daemon nor the
// worker needs a crypto library.

#include <string>
#include <string_view>

namespace ks {

// The digest of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);
// The digest of `data`: its 32 bytes (for HMAC, base/secret.hpp).
std::string sha256_bytes(std::string_view data);

}  // namespace ks
