#pragma once
// An on-disk cache of LLM replies (`coder.llm.cache_dir`), so that a re-run of an
// experiment costs nothing and answers the same, and a crashed daemon does not pay
// twice for what it already received.
//
// Key: the SHA-256 of the canonical JSON of everything that decides a reply —
// provider, model, temperature, max_tokens, system prompt and messages. The endpoint,
// the key and the agent/task labels take no part: the same question to the same model
// is the same question. One file per reply, DIR/KK/KEY.json (KK: the key's first two
// hex digits), written to a temporary file in the same directory and renamed into
// place, so a reader never sees half a file and concurrent writers of one key are
// harmless. Only successful replies are stored. A file that cannot be read or parsed,
// or whose stored request differs from the key's, is a miss (and is overwritten).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "llm/chat.hpp"

namespace ks {

// What the cache key is computed from.
struct cache_key_fields {
  std::string provider;
  std::string model;
  double temperature = 0;
  int max_tokens = 0;
  std::string system;
  std::vector<chat_message> messages;
};

// The canonical JSON text of the fields (sorted keys, no whitespace) and its digest.
std::string cache_key_text(const cache_key_fields& fields);
std::string cache_key(const cache_key_fields& fields);

// What is stored of a reply.
struct cached_reply {
  std::string text;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::string model;
  std::string finish_reason;
};

class response_cache {
 public:
  explicit response_cache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // Creates the directory if needed; the error names it.
  status open();

  std::optional<cached_reply> load(const cache_key_fields& fields) const;
  status store(const cache_key_fields& fields, const cached_reply& reply) const;

  std::filesystem::path path_for(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace ks
