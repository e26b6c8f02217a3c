#pragma once
// The LLM client: sends chat requests to an OpenAI-compatible or Anthropic endpoint
// and returns the reply, or an error a user can act on. One client serves every agent
// of the daemon; it is thread-safe and its calls block (the llm actor runs them off
// the actor scheduler).
//
// What it promises (docs/llm.md):
// - requests follow coder.llm (provider, endpoint, model, api_key_env, timeout_s,
//   max_retries, temperature, max_tokens, cache_dir); a chat_request can override
//   temperature and max_tokens;
// - at most `max_in_flight` HTTP requests are outstanding at once across all agents
//   (budgets.llm_requests_in_flight) — a counting semaphore, held only while a request
//   is on the wire, not during back-off;
// - each attempt is bounded by timeout_s (connect, send and receive together);
//   connection errors, timeouts, HTTP 408, 429 and 5xx are retried up to max_retries
//   times with exponential back-off and jitter, honouring Retry-After (and
//   retry-after-ms); other 4xx replies are not retried, and their error quotes the
//   API's message;
// - the API key is read once, from the environment variable named by api_key_env, and
//   never appears in a log line or an error message;
// - successful replies are cached on disk when cache_dir is set (llm/response_cache.hpp);
// - tokens and cost are accounted per task and agent (llm/usage_ledger.hpp).

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
#include "llm/usage_ledger.hpp"

namespace ks {

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
  int max_in_flight = 4;                       // budgets.llm_requests_in_flight
  std::shared_ptr<request_limiter> limiter;    // if set, used instead of max_in_flight
  std::shared_ptr<usage_ledger> ledger;        // if set, shared; else the client's own
  double backoff_initial_s = 1.0;              // first retry waits about this long
  double backoff_max_s = 30.0;                 // cap of one back-off wait
  double max_retry_after_s = 120.0;            // a longer Retry-After ends the call
  double connect_timeout_s = 10.0;             // capped by llm.timeout_s
  std::map<std::string, model_price> prices;   // added to / overriding default_prices()
  std::string anthropic_version = "2023-06-01";
  uint64_t jitter_seed = 0;                    // 0: seeded from std::random_device
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

  const usage_ledger& usage() const { return *ledger_; }
  const request_limiter& limiter() const { return *limiter_; }
  const llm_client_options& options() const { return options_; }
  // "openai http://host:port/v1/chat/completions, model M": for messages.
  std::string describe() const;

  llm_client(const llm_client&) = delete;
  llm_client& operator=(const llm_client&) = delete;

 private:
  struct attempt_outcome;
  llm_client(llm_client_options options, endpoint_url endpoint, std::string api_key);
  attempt_outcome attempt(const std::string& body);
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
};

// Seconds to wait from a Retry-After header value: delta-seconds (integer or decimal)
// or an HTTP-date. nullopt when unparseable.
std::optional<double> parse_retry_after(const std::string& value,
                                        std::chrono::system_clock::time_point now =
                                            std::chrono::system_clock::now());

}  // namespace ks
