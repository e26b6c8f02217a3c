#pragma once
// The LLM client: sends chat requests to an OpenAI-compatible or Anthropic endpoint
// and returns the reply, or an error a user can act on. One client serves every agent
// of the daemon; it is thread-safe and its calls block (the llm actor runs them off
// the actor scheduler).
//
// What it promises (docs/llm.md):
// - requests follow coder.llm (provider, endpoint, model, api_key_env, timeout_s,
//   reply_timeout_s, stream, max_retries, temperature, max_tokens, reasoning,
//   reasoning_effort, context_tokens, cache_dir); a chat_request can override
//   temperature and max_tokens;
// - replies are streamed (SSE) unless coder.llm.stream is false; a server that answers
//   a streamed request with a whole JSON reply is read as such;
// - timeout_s bounds every silence (the wait for the first byte, each gap between
//   streamed tokens), not the whole reply; reply_timeout_s, when set, bounds the whole;
// - at most `max_in_flight` HTTP requests are outstanding at once across all agents
//   (budgets.llm_requests_in_flight) — a counting semaphore, held only while a request
//   is on the wire, not during back-off;
// - connection errors, silences past timeout_s, a stream cut mid-reply, HTTP 408, 429
//   and 5xx (Anthropic's 529 included) and a mid-stream overloaded/api error are
//   retried up to max_retries times with exponential back-off and jitter, honouring
//   Retry-After (and retry-after-ms); other 4xx replies are not retried, and their
//   error quotes the API's message and says what to change (llm/api_error.hpp);
// - the model's context window (configured, or read from the server: llm/server_info.hpp)
//   is respected before sending: max_tokens is lowered to what the prompt leaves, and
//   a prompt that leaves too little is refused without a request; a context-length
//   error that names the numbers (vLLM, llama.cpp, Anthropic) is answered by one
//   immediate retry with the max_tokens that fits;
// - the API key is read once, from the environment variable named by api_key_env, and
//   never appears in a log line or an error message;
// - successful replies are cached on disk when cache_dir is set (llm/response_cache.hpp);
// - tokens and cost are accounted per task and agent (llm/usage_ledger.hpp); a server
//   that reports no usage has its tokens estimated, with a note saying so.

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "base/result.hpp"
#include "config/experiment_config.hpp"
#include "llm/chat.hpp"
#include "llm/endpoint.hpp"
#include "llm/response_cache.hpp"
#include "llm/token_budget.hpp"
#include "llm/usage_ledger.hpp"

namespace ks {

struct api_error_info;  // llm/api_error.hpp

// A counting semaphore with a view of its use; share one between clients to bound
// them together.
class request_limiter {
 public:
  explicit request_limiter(int limit);

  void acquire();
  void release();

  int limit() const { return limit_; }
  int in_flight() const;
  int peak() const;  // the most ever held at once

 private:
  const int limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  int peak_ = 0;
};

struct llm_client_options {
  llm_config llm;
  int max_in_flight = 4;                     // budgets.llm_requests_in_flight
  std::shared_ptr<request_limiter> limiter;  // if set, used instead of max_in_flight
  std::shared_ptr<usage_ledger> ledger;      // if set, shared; else the client's own
  double backoff_initial_s = 1.0;            // first retry waits about this long
  double backoff_max_s = 30.0;               // cap of one back-off wait
  double max_retry_after_s = 120.0;          // a longer Retry-After ends the call
  double connect_timeout_s = 10.0;           // capped by llm.timeout_s
  double probe_timeout_s = 5.0;              // each GET that asks the server its context
  // The least max_tokens a request is sent with when the context is short: a kernel
  // and its plan need about this many (capped by the request's own max_tokens).
  int min_reply_tokens = 2048;
  size_t max_body_bytes = 64u << 20;          // a larger reply is an error
  std::map<std::string, model_price> prices;  // added to / overriding default_prices()
  std::string anthropic_version = "2023-06-01";
  uint64_t jitter_seed = 0;  // 0: seeded from std::random_device
};

// Options for `config`: its coder.llm and budgets.llm_requests_in_flight.
llm_client_options client_options(const experiment_config& config);

class llm_client {
 public:
  // Checks the options and reads the API key. Errors: an unknown provider, a malformed
  // endpoint, an empty model, api_key_env naming a variable that is not set (or is
  // empty), a cache directory that cannot be created, a limit < 1.
  static result<std::unique_ptr<llm_client>> create(llm_client_options options);

  // Sends one request (or answers it from the cache). Blocks until a reply, an error
  // that is not worth retrying, or the retries are spent.
  result<chat_response> chat(const chat_request& request);

  // The model's context window in tokens and where it came from ("coder.llm.
  // context_tokens", "the server's /v1/models (max_model_len)", …): asked once, on
  // first use; learned from a context-length error when the server names it.
  // nullopt: not known (requests are sent unchecked).
  std::optional<int64_t> context_tokens();
  std::string context_source();

  // The room an agent's prompt has: the context less the reply's max_tokens (at most
  // half the context: a max_tokens as large as the window leaves the prompt half of it,
  // and the reply is then lowered to what the prompt leaves) and a margin, capped by
  // coder.llm.prompt_tokens; tokens 0 when neither bounds it. The
  // characters a token takes, as calibrated so far, convert it for the prompt builders.
  struct prompt_room {
    int64_t tokens = 0;
    double chars_per_token = token_estimator::kInitialCharsPerToken;
  };
  prompt_room room_for_prompt(std::optional<int> max_tokens = std::nullopt);
  const token_estimator& estimator() const { return estimator_; }

  const usage_ledger& usage() const { return *ledger_; }
  const request_limiter& limiter() const { return *limiter_; }
  const llm_client_options& options() const { return options_; }
  // "openai http://host:port/v1/chat/completions, model M": for messages.
  std::string describe() const;

  llm_client(const llm_client&) = delete;
  llm_client& operator=(const llm_client&) = delete;

 private:
  struct attempt_outcome;
  struct reception;  // what one attempt received (llm_client.cpp)
  llm_client(llm_client_options options, endpoint_url endpoint, std::string api_key);
  // chat()'s steps: the request checked, a cached reply, each HTTP attempt, the reply
  // accounted (and cached), or the attempt's error and, for a context-length error,
  // the max_tokens to send again with.
  std::string request_problem(const chat_request& request, int requested, double temperature) const;
  std::optional<chat_response> cached_reply(const chat_request& request, const cache_key_fields& key, int max_tokens);
  attempt_outcome attempt(const std::string& body, bool stream);
  // attempt()'s outcome: cut short while it arrived (a stream error, the reply's
  // deadline, its size), no reply at all, or a reply.
  attempt_outcome stopped(const reception& rx) const;
  attempt_outcome unanswered(const reception& rx) const;
  attempt_outcome answered(reception& rx) const;
  struct reply_context {
    int attempts = 0;
    int max_tokens = 0;
    size_t chars = 0;                           // the request's characters
    int64_t prompt_estimate = 0;                // its tokens, estimated
    std::optional<cache_key_fields> cache_key;  // where to cache the reply, if anywhere
  };
  chat_response accept_reply(const chat_request& request, attempt_outcome& out, const reply_context& rc);
  std::string attempt_error(const attempt_outcome& out) const;
  struct context_retry {
    size_t chars = 0;
    int min_reply = 0, requested = 0, max_tokens = 0;
    bool retried = false;  // sent again for the context once already
  };
  std::optional<int> context_retry_tokens(const chat_request& request, const api_error_info& e,
                                          const context_retry& cr);
  void probe_context();
  void learn_context(int64_t tokens, const std::string& source);
  double backoff_s(int retry);
  void account(const chat_request& request, const usage_counts& delta);

  llm_client_options options_;
  endpoint_url endpoint_;
  std::string path_;
  std::string api_key_;  // never logged
  std::map<std::string, model_price> prices_;
  std::shared_ptr<request_limiter> limiter_;
  std::shared_ptr<usage_ledger> ledger_;
  std::optional<response_cache> cache_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  std::mutex notes_mu_;
  std::map<std::string, bool> unpriced_warned_;
  token_estimator estimator_;
  std::once_flag probe_once_;
  std::mutex context_mu_;
  std::optional<int64_t> context_;
  std::string context_source_;
};

// Seconds to wait from a Retry-After header value: delta-seconds (integer or decimal)
// or an HTTP-date. nullopt when unparseable.
std::optional<double> parse_retry_after(const std::string& value,
                                        std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace ks
