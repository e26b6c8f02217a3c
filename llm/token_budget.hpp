#pragma once
// Token arithmetic without the model's tokenizer: a prompt's size estimated from its
// characters, calibrated by the counts the server reports back, and the fit of a
// prompt plus its reply into the model's context window.
//
// The estimate starts at 3 characters a token — fewer than CUDA source and English
// prose take in the tokenizers of the models people serve (Llama 3, Qwen 2.5, GPT-4o:
// 3.5–4.5), so it over-counts, which is the safe side for a window. Each reply's
// usage (prompt_tokens / input_tokens) replaces it by the lowest ratio observed, so
// after one call the estimate is the model's own, within a few per cent.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "llm/chat.hpp"

namespace ks {

class token_estimator {
 public:
  static constexpr double kInitialCharsPerToken = 3.0;

  // Tokens of `chars` characters of text.
  int64_t estimate(size_t chars) const;
  // Tokens of a whole request: the system prompt and every message, plus the chat
  // template's few tokens per message.
  int64_t estimate(const std::string& system, const std::vector<chat_message>& messages) const;
  // A reply reported `tokens` prompt tokens for `chars` characters of request text.
  // Ignored when either is 0 or the ratio is outside [1, 10] (a server that counts
  // nothing, or a cached prefix it did not count).
  void observe(size_t chars, int64_t tokens);
  double chars_per_token() const;
  bool calibrated() const;

 private:
  mutable std::mutex mu_;
  double ratio_ = kInitialCharsPerToken;
  bool calibrated_ = false;
};

// The characters of a request's text (what observe() is given).
size_t request_chars(const std::string& system, const std::vector<chat_message>& messages);

// What to send as max_tokens for a prompt of `prompt_tokens` in a window of `window`
// tokens (0: unknown, nothing is checked). The reply keeps `requested` when it fits;
// else it is lowered to what fits after a margin, down to `min_reply`; below that the
// request does not fit and `problem` says by how much.
struct reply_fit {
  int max_tokens = 0;
  bool lowered = false;
  std::string problem;  // non-empty: do not send
};
reply_fit fit_reply(int64_t prompt_tokens, int requested, int64_t window, int min_reply);

// The safety margin kept free in a window: the template tokens a chat format adds
// and the estimate's error (64 tokens + 3% of the prompt).
int64_t context_margin(int64_t prompt_tokens);

}  // namespace ks
