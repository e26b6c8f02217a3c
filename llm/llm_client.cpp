#include "llm/llm_client.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "llm/provider_format.hpp"

namespace ks {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.0f s", s);
  return buf;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 529: return "Overloaded";
    default: return "";
  }
}

std::string http_status_text(int status) {
  std::string s = "HTTP " + std::to_string(status);
  if (const char* r = reason_phrase(status); *r) s += std::string(" ") + r;
  return s;
}

// What a status means to a user, where there is something to add.
std::string status_hint(int status) {
  switch (status) {
    case 401:
    case 403: return " (check the API key in the variable named by coder.llm.api_key_env)";
    case 404: return " (check coder.llm.endpoint and coder.llm.model)";
    default: return "";
  }
}

template <class F>
void set_timeout(F&& setter, double seconds) {
  const auto us = static_cast<int64_t>(std::max(seconds, 0.001) * 1e6);
  setter(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
}

}  // namespace

// ---------------------------------------------------------------------------

request_limiter::request_limiter(int limit) : limit_(std::max(limit, 1)) {}

void request_limiter::acquire() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ < limit_; });
  ++in_flight_;
  peak_ = std::max(peak_, in_flight_);
}

void request_limiter::release() {
  {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  cv_.notify_one();
}

int request_limiter::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

int request_limiter::peak() const {
  std::lock_guard lock(mu_);
  return peak_;
}

// ---------------------------------------------------------------------------

std::optional<double> parse_retry_after(const std::string& value_in,
                                        std::chrono::system_clock::time_point now) {
  std::string v = value_in;
  v.erase(0, v.find_first_not_of(" \t"));
  v.erase(v.find_last_not_of(" \t") + 1);
  if (v.empty()) return std::nullopt;
  if (v.find_first_not_of("0123456789.") == std::string::npos) {
    try {
      size_t used = 0;
      const double s = std::stod(v, &used);
      if (used != v.size() || !std::isfinite(s) || s < 0) return std::nullopt;
      return s;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::tm tm{};
  const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (!end) return std::nullopt;
  const std::time_t when = timegm(&tm);
  const double delta =
      std::difftime(when, std::chrono::system_clock::to_time_t(now));
  return std::max(0.0, delta);
}

llm_client_options client_options(const experiment_config& config) {
  llm_client_options o;
  o.llm = config.coder.llm;
  o.max_in_flight = config.budgets.llm_requests_in_flight;
  return o;
}

result<std::unique_ptr<llm_client>> llm_client::create(llm_client_options options) {
  const llm_config& c = options.llm;
  if (!is_known_provider(c.provider))
    return ks::error{"coder.llm.provider: unknown provider '" + c.provider +
                     "'; expected openai or anthropic"};
  auto endpoint = parse_endpoint(c.endpoint);
  if (!endpoint) return ks::error{"coder.llm.endpoint: " + endpoint.message()};
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (endpoint->scheme == "https")
    return ks::error{"coder.llm.endpoint: https needs cpp-httplib built with OpenSSL, "
                     "and this one is not; use http or rebuild"};
#endif
  if (c.model.empty()) return ks::error{"coder.llm.model is empty: name the model to use"};
  if (!(c.timeout_s > 0)) return ks::error{"coder.llm.timeout_s must be > 0"};
  if (c.max_retries < 0) return ks::error{"coder.llm.max_retries must be >= 0"};
  if (c.max_tokens < 1) return ks::error{"coder.llm.max_tokens must be >= 1"};
  if (!options.limiter && options.max_in_flight < 1)
    return ks::error{"budgets.llm_requests_in_flight must be >= 1"};

  std::string key;
  if (!c.api_key_env.empty()) {
    const char* value = std::getenv(c.api_key_env.c_str());
    if (!value)
      return ks::error{"the API key variable " + c.api_key_env +
                       " (coder.llm.api_key_env) is not set in the environment; export " +
                       c.api_key_env + "=<your key>, or set api_key_env to \"\" for an "
                       "endpoint that needs no key"};
    key = value;
    if (key.empty())
      return ks::error{"the API key variable " + c.api_key_env +
                       " (coder.llm.api_key_env) is set but empty"};
  }

  std::unique_ptr<llm_client> client(
      new llm_client(std::move(options), std::move(*endpoint), std::move(key)));
  if (!client->options_.llm.cache_dir.empty()) {
    client->cache_.emplace(client->options_.llm.cache_dir);
    if (auto st = client->cache_->open(); !st) return ks::error{"coder.llm.cache_dir: " + st.message()};
  }
  return client;
}

llm_client::llm_client(llm_client_options options, endpoint_url endpoint, std::string api_key)
    : options_(std::move(options)),
      endpoint_(std::move(endpoint)),
      api_key_(std::move(api_key)),
      prices_(default_prices()) {
  path_ = request_path(options_.llm.provider, endpoint_);
  for (const auto& [model, price] : options_.prices) prices_[model] = price;
  limiter_ = options_.limiter ? options_.limiter
                              : std::make_shared<request_limiter>(options_.max_in_flight);
  ledger_ = options_.ledger ? options_.ledger : std::make_shared<usage_ledger>();
  rng_.seed(options_.jitter_seed ? options_.jitter_seed : std::random_device{}());
}

std::string llm_client::describe() const {
  return options_.llm.provider + " " + endpoint_.origin() + path_ + ", model " +
         options_.llm.model;
}

double llm_client::backoff_s(int retry) {
  const double base = std::min(options_.backoff_max_s,
                               options_.backoff_initial_s * std::pow(2.0, retry - 1));
  std::lock_guard lock(rng_mu_);
  std::uniform_real_distribution<double> u(0.5, 1.0);
  return base * u(rng_);
}

void llm_client::account(const chat_request& request, const usage_counts& delta) {
  ledger_->record(request.task, to_string(request.agent), delta);
}

// One HTTP attempt and what became of it.
struct llm_client::attempt_outcome {
  int status = 0;                        // 0: no HTTP reply
  std::string body;
  std::optional<double> retry_after_s;
  std::string transport_error;           // set when status == 0
  bool timed_out = false;
  bool retryable = false;
};

llm_client::attempt_outcome llm_client::attempt(const std::string& body) {
  const double timeout = options_.llm.timeout_s;
  httplib::Client cli(endpoint_.origin());
  set_timeout([&](time_t s, time_t us) { cli.set_connection_timeout(s, us); },
              std::min(timeout, options_.connect_timeout_s));
  set_timeout([&](time_t s, time_t us) { cli.set_read_timeout(s, us); }, timeout);
  set_timeout([&](time_t s, time_t us) { cli.set_write_timeout(s, us); }, timeout);
  cli.set_keep_alive(false);

  httplib::Request req;
  req.method = "POST";
  req.path = path_;
  for (const auto& [k, v] : auth_headers(options_.llm.provider, api_key_, options_.anthropic_version))
    req.set_header(k, v);
  req.set_header("Content-Type", "application/json");
  req.body = body;
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(timeout));
  bool deadline_hit = false;
  // A reply that trickles in slower than the timeout is cut off too: the read
  // timeout alone only bounds the gaps between bytes.
  req.progress = [&](uint64_t, uint64_t) {
    if (clock_type::now() > deadline) {
      deadline_hit = true;
      return false;
    }
    return true;
  };

  attempt_outcome out;
  limiter_->acquire();
  httplib::Result res = cli.send(req);
  limiter_->release();
  const double elapsed = seconds_since(start);

  if (!res) {
    const httplib::Error err = res.error();
    out.retryable = true;
    if (deadline_hit || err == httplib::Error::ConnectionTimeout ||
        (err == httplib::Error::Read && elapsed >= 0.9 * timeout)) {
      out.timed_out = true;
      out.transport_error = "no complete reply within the timeout of " + fmt_seconds(timeout) +
                            " (coder.llm.timeout_s)";
    } else if (err == httplib::Error::Connection) {
      out.transport_error = "cannot connect to " + endpoint_.origin() +
                            " (connection refused or host unreachable: is the server running?)";
    } else {
      out.transport_error = httplib::to_string(err);
      if (err == httplib::Error::SSLServerVerification || err == httplib::Error::SSLLoadingCerts)
        out.retryable = false;
    }
    return out;
  }
  out.status = res->status;
  out.body = std::move(res->body);
  if (res->has_header("retry-after-ms")) {
    if (auto ms = parse_retry_after(res->get_header_value("retry-after-ms")))
      out.retry_after_s = *ms / 1000.0;
  }
  if (!out.retry_after_s && res->has_header("Retry-After"))
    out.retry_after_s = parse_retry_after(res->get_header_value("Retry-After"));
  out.retryable = out.status == 408 || out.status == 429 || out.status >= 500;
  return out;
}

result<chat_response> llm_client::chat(const chat_request& request) {
  const auto start = clock_type::now();
  const llm_config& c = options_.llm;
  const std::string who = "llm (" + describe() + ")";
  const int max_tokens = request.max_tokens.value_or(c.max_tokens);
  const double temperature = request.temperature.value_or(c.temperature);

  auto refuse = [&](const std::string& why) -> result<chat_response> {
    account(request, usage_counts{.failures = 1});
    return ks::error{who + ": " + why};
  };
  if (request.messages.empty()) return refuse("the request has no messages");
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const auto& role = request.messages[i].role;
    if (role != "user" && role != "assistant")
      return refuse("messages[" + std::to_string(i) + "].role is '" + role +
                    "'; expected user or assistant (the system prompt has its own field)");
  }
  if (max_tokens < 1) return refuse("max_tokens must be >= 1");
  if (!(temperature >= 0)) return refuse("temperature must be >= 0");
  if (c.provider == "anthropic" && temperature > 1)
    return refuse("temperature " + std::to_string(temperature).substr(0, 4) +
                  " is above Anthropic's maximum of 1 (coder.llm.temperature)");

  const cache_key_fields key{c.provider, c.model, temperature, max_tokens, request.system,
                             request.messages};
  const bool use_cache = cache_ && request.use_cache;
  if (use_cache) {
    if (auto hit = cache_->load(key)) {
      chat_response r;
      r.text = std::move(hit->text);
      r.input_tokens = hit->input_tokens;
      r.output_tokens = hit->output_tokens;
      r.model = std::move(hit->model);
      r.finish_reason = std::move(hit->finish_reason);
      r.cached = true;
      r.latency_ms = seconds_since(start) * 1e3;
      account(request, usage_counts{.requests = 1, .cache_hits = 1});
      spdlog::debug("llm {} for task '{}': cache hit", to_string(request.agent), request.task);
      return r;
    }
  }

  const std::string body =
      encode_chat_body(c.provider, c.model, request.system, request.messages, max_tokens,
                       temperature);
  const int max_attempts = 1 + c.max_retries;
  std::string last_error;
  int attempts = 0;
  for (int n = 1; n <= max_attempts; ++n) {
    attempts = n;
    attempt_outcome out = attempt(body);
    if (out.status >= 200 && out.status < 300) {
      auto decoded = decode_chat_body(c.provider, out.body);
      if (!decoded) {
        account(request, usage_counts{.failures = 1, .attempts = n});
        return ks::error{who + ": " + http_status_text(out.status) + " but " +
                         decoded.message()};
      }
      chat_response r;
      r.text = std::move(decoded->text);
      r.input_tokens = decoded->input_tokens;
      r.output_tokens = decoded->output_tokens;
      r.model = decoded->model.empty() ? c.model : decoded->model;
      r.finish_reason = std::move(decoded->finish_reason);
      r.attempts = n;
      usage_counts delta{.requests = 1, .attempts = n, .input_tokens = r.input_tokens,
                         .output_tokens = r.output_tokens};
      const model_price* price = find_price(prices_, c.model);
      if (!price) price = find_price(prices_, r.model);
      if (price) {
        r.cost_usd = cost_usd(*price, r.input_tokens, r.output_tokens);
        delta.cost_usd = r.cost_usd;
      } else {
        delta.notes.insert("no price for model '" + c.model +
                           "': its tokens are counted, its cost as 0 (add a price for it)");
        std::lock_guard lock(notes_mu_);
        if (!unpriced_warned_[c.model]) {
          unpriced_warned_[c.model] = true;
          spdlog::warn("llm: no price for model '{}': counting its cost as 0", c.model);
        }
      }
      account(request, delta);
      if (use_cache) {
        if (auto st = cache_->store(key, {r.text, r.input_tokens, r.output_tokens, r.model,
                                          r.finish_reason});
            !st)
          spdlog::warn("{}", st.message());
      }
      r.latency_ms = seconds_since(start) * 1e3;
      spdlog::debug("llm {} for task '{}': {} attempt(s), {:.0f} ms, {} in / {} out tokens",
                    to_string(request.agent), request.task, n, r.latency_ms, r.input_tokens,
                    r.output_tokens);
      return r;
    }

    if (out.status != 0) {
      last_error = http_status_text(out.status) + status_hint(out.status) + ": " +
                   api_error_text(out.body);
    } else {
      last_error = out.transport_error;
    }
    if (!out.retryable) {
      account(request, usage_counts{.failures = 1, .attempts = n});
      const std::string why =
          out.status != 0 ? " (a 4xx reply other than 408/429 means the request itself was "
                            "refused; not retried)"
                          : " (not retried)";
      return ks::error{who + ": " + last_error + why};
    }
    if (n == max_attempts) break;
    double wait = backoff_s(n);
    if (out.retry_after_s) {
      if (*out.retry_after_s > options_.max_retry_after_s) {
        account(request, usage_counts{.failures = 1, .attempts = n});
        return ks::error{who + ": " + last_error + "; the server asks to retry after " +
                         fmt_seconds(*out.retry_after_s) + ", longer than the limit of " +
                         fmt_seconds(options_.max_retry_after_s) + "; giving up"};
      }
      wait = *out.retry_after_s;
    }
    spdlog::warn("{}: attempt {}/{} failed: {}; retrying in {}", who, n, max_attempts,
                 last_error, fmt_seconds(wait));
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  account(request, usage_counts{.failures = 1, .attempts = attempts});
  return ks::error{who + ": gave up after " + std::to_string(attempts) + " attempt" +
                   (attempts == 1 ? "" : "s") + " in " + fmt_seconds(seconds_since(start)) +
                   " (coder.llm.max_retries = " + std::to_string(c.max_retries) +
                   "); last error: " + last_error};
}

}  // namespace ks
