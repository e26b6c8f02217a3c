#include "llm/token_budget.hpp"

#include <algorithm>
#include <cmath>

namespace ks {

namespace {
// Tokens a chat template adds around each message (role markers, separators):
// ChatML adds 4-5, Llama 3's template 5, Anthropic's a few.
constexpr int64_t kTokensPerMessage = 8;
}  // namespace

int64_t token_estimator::estimate(size_t chars) const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(std::ceil(static_cast<double>(chars) / ratio_));
}

int64_t token_estimator::estimate(const std::string& system, const std::vector<chat_message>& messages) const {
  return estimate(request_chars(system, messages)) +
         kTokensPerMessage * static_cast<int64_t>(messages.size() + (system.empty() ? 0 : 1));
}

void token_estimator::observe(size_t chars, int64_t tokens) {
  if (chars == 0 || tokens <= 0) return;
  const double r = static_cast<double>(chars) / static_cast<double>(tokens);
  if (r < 1.0 || r > 10.0) return;
  std::lock_guard lock(mu_);
  ratio_ = calibrated_ ? std::min(ratio_, r) : r;
  calibrated_ = true;
}

double token_estimator::chars_per_token() const {
  std::lock_guard lock(mu_);
  return ratio_;
}

bool token_estimator::calibrated() const {
  std::lock_guard lock(mu_);
  return calibrated_;
}

size_t request_chars(const std::string& system, const std::vector<chat_message>& messages) {
  size_t n = system.size();
  for (const auto& m : messages) n += m.content.size();
  return n;
}

int64_t context_margin(int64_t prompt_tokens) { return 64 + prompt_tokens * 3 / 100; }

reply_fit fit_reply(int64_t prompt_tokens, int requested, int64_t window, int min_reply) {
  reply_fit out;
  out.max_tokens = requested;
  if (window <= 0) return out;
  const int64_t room = window - prompt_tokens - context_margin(prompt_tokens);
  if (room >= requested) return out;
  const int64_t floor = std::min<int64_t>(min_reply, requested);
  if (room >= floor) {
    out.max_tokens = static_cast<int>(room);
    out.lowered = true;
    return out;
  }
  out.problem = "the prompt (about " + std::to_string(prompt_tokens) + " tokens, estimated) leaves " +
                (room > 0 ? std::to_string(room) : std::string("no")) + " tokens of the model's context of " +
                std::to_string(window) + " for the reply, which needs at least " + std::to_string(floor);
  return out;
}

}  // namespace ks
