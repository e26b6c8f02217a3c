#pragma once
// Secrets: what an attacker must not guess or learn. Random bytes from the kernel's
// generator (getrandom), names made of them (task ids), HMAC-SHA256 (the GPU worker's
// challenge-response, protocol/worker_link.hpp), comparison in constant time, and a
// shared token read from a file or an environment variable — never from a command
// line, which every user of the machine can read in /proc.
//
// What it promises:
// - random_bytes never returns fewer bytes or predictable ones: it aborts the process
//   if the kernel's generator cannot be read (a secret made of anything else would be
//   guessable);
// - equal_secrets takes the same time wherever its arguments first differ;
// - read_shared_token refuses a file that other users may read, and names the file or
//   variable in every error, never the secret.

#include <string>
#include <string_view>

#include "base/result.hpp"

namespace ks {

// `n` bytes from getrandom(2).
std::string random_bytes(size_t n);

// `bytes` in RFC 4648 base32, lowercase and unpadded (a–z, 2–7): 16 bytes → 26 letters.
std::string base32_lower(std::string_view bytes);

// HMAC-SHA256(key, message) (RFC 2104): 32 bytes.
std::string hmac_sha256(std::string_view key, std::string_view message);

// Equal strings, compared in time that does not depend on where they first differ.
bool equal_secrets(std::string_view a, std::string_view b);

// A shared token: the first line of `file` when it is set (`~/` is the home directory;
// the file must not be readable by group or others: chmod 600; an empty first line is
// an error), else the value of the environment variable `env_name`; trailing white
// space is dropped. Empty when no file is named and the variable is unset or empty. A
// token of fewer than 16 characters is refused (it could be guessed). `what` prefixes
// errors ("--token-file", "gpus.remote_token_file").
result<std::string> read_shared_token(const std::string& file, const std::string& env_name, const std::string& what);

}  // namespace ks
