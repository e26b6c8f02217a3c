#include "llm/llm_client.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "llm/api_error.hpp"
#include "llm/provider_format.hpp"
#include "llm/server_info.hpp"
#include "llm/sse_stream.hpp"

namespace ks {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.0f s", s);
  return buf;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 529:
      return "Overloaded";
    default:
      return "";
  }
}

std::string http_status_text(int status) {
  std::string s = "HTTP " + std::to_string(status);
  if (const char* r = reason_phrase(status); *r) s += std::string(" ") + r;
  return s;
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

std::optional<double> parse_retry_after(const std::string& value_in, std::chrono::system_clock::time_point now) {
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
  const double delta = std::difftime(when, std::chrono::system_clock::to_time_t(now));
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
    return ks::error{"coder.llm.provider: unknown provider '" + c.provider + "'; expected openai or anthropic"};
  auto endpoint = parse_endpoint(c.endpoint);
  if (!endpoint) return ks::error{"coder.llm.endpoint: " + endpoint.message()};
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (endpoint->scheme == "https")
    return ks::error{
        "coder.llm.endpoint: https needs cpp-httplib built with OpenSSL, "
        "and this one is not; use http or rebuild"};
#endif
  if (c.model.empty()) return ks::error{"coder.llm.model is empty: name the model to use"};
  if (!(c.timeout_s > 0)) return ks::error{"coder.llm.timeout_s must be > 0"};
  if (!(c.reply_timeout_s >= 0)) return ks::error{"coder.llm.reply_timeout_s must be >= 0 (0: no bound)"};
  if (c.context_tokens < 0) return ks::error{"coder.llm.context_tokens must be >= 0 (0: ask the server)"};
  if (c.prompt_tokens < 0) return ks::error{"coder.llm.prompt_tokens must be >= 0"};
  if (c.max_retries < 0) return ks::error{"coder.llm.max_retries must be >= 0"};
  if (c.max_tokens < 1) return ks::error{"coder.llm.max_tokens must be >= 1"};
  if (!options.limiter && options.max_in_flight < 1) return ks::error{"budgets.llm_requests_in_flight must be >= 1"};

  std::string key;
  if (!c.api_key_env.empty()) {
    const char* value = std::getenv(c.api_key_env.c_str());
    if (!value)
      return ks::error{"the API key variable " + c.api_key_env +
                       " (coder.llm.api_key_env) is not set in the environment; export " + c.api_key_env +
                       "=<your key>, or set api_key_env to \"\" for an "
                       "endpoint that needs no key"};
    key = value;
    if (key.empty())
      return ks::error{"the API key variable " + c.api_key_env + " (coder.llm.api_key_env) is set but empty"};
  }

  std::unique_ptr<llm_client> client(new llm_client(std::move(options), std::move(*endpoint), std::move(key)));
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
  limiter_ = options_.limiter ? options_.limiter : std::make_shared<request_limiter>(options_.max_in_flight);
  ledger_ = options_.ledger ? options_.ledger : std::make_shared<usage_ledger>();
  rng_.seed(options_.jitter_seed ? options_.jitter_seed : std::random_device{}());
}

std::string llm_client::describe() const {
  return options_.llm.provider + " " + endpoint_.origin() + path_ + ", model " + options_.llm.model;
}

double llm_client::backoff_s(int retry) {
  const double base = std::min(options_.backoff_max_s, options_.backoff_initial_s * std::pow(2.0, retry - 1));
  std::lock_guard lock(rng_mu_);
  std::uniform_real_distribution<double> u(0.5, 1.0);
  return base * u(rng_);
}

void llm_client::account(const chat_request& request, const usage_counts& delta) {
  ledger_->record(request.task, to_string(request.agent), delta);
}

// One HTTP attempt and what became of it.
struct llm_client::attempt_outcome {
  int status = 0;                      // 0: no HTTP reply (or one cut short)
  std::string body;                    // the body of a reply that is not a stream
  std::optional<decoded_reply> reply;  // a complete reply
  bool usage_seen = false;
  bool streamed = false;
  std::optional<double> retry_after_s;
  std::string transport_error;  // set when neither reply nor status says it
  std::optional<api_error_info> api_error;
  bool timed_out = false;
  bool retryable = false;
};

// What one attempt received, as cpp-httplib hands it over: the status line, the bytes
// of the body (a stream fed to the decoder as it comes), and why it was cut short.
struct llm_client::reception {
  explicit reception(const std::string& provider) : decoder(provider) {}
  clock_type::time_point start = clock_type::now();
  clock_type::time_point last_byte = start;
  bool bounded = false;  // coder.llm.reply_timeout_s bounds the whole reply, by `deadline`
  clock_type::time_point deadline;
  uint64_t max_body = 0;
  uint64_t bytes = 0;
  int status = 0;
  bool event_stream = false;
  bool deadline_hit = false, stream_failed = false, too_big = false;
  std::string stream_problem;
  std::string raw;
  chat_stream_decoder decoder;
  // Once sent: the reply (none when cpp-httplib gave up: `error`), and how long the
  // server had been silent then.
  const httplib::Response* response = nullptr;
  httplib::Error error = httplib::Error::Success;
  double silent = 0;

  // cpp-httplib (0.11) calls response_handler once the status line and headers are
  // read, then content_receiver with each piece of the body as it arrives (chunked or
  // not), for every status; returning false cancels the request (Error::Canceled).
  void listen(httplib::Request& req) {
    req.response_handler = [this](const httplib::Response& r) {
      status = r.status;
      const std::string type = r.get_header_value("Content-Type");
      event_stream = r.status >= 200 && r.status < 300 && type.rfind("text/event-stream", 0) == 0;
      return true;
    };
    req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
      last_byte = clock_type::now();
      bytes += n;
      if (bounded && last_byte > deadline) {
        deadline_hit = true;
        return false;
      }
      if (bytes > max_body) {
        too_big = true;
        return false;
      }
      if (event_stream) {
        if (auto st = decoder.feed(std::string_view(data, n)); !st) {
          stream_failed = true;
          stream_problem = st.message();
          return false;
        }
        return true;
      }
      raw.append(data, n);
      return true;
    };
  }
};

llm_client::attempt_outcome llm_client::attempt(const std::string& body, bool stream) {
  const llm_config& c = options_.llm;
  const double idle = c.timeout_s;
  httplib::Client cli(endpoint_.origin());
  set_timeout([&](time_t s, time_t us) { cli.set_connection_timeout(s, us); },
              std::min(idle, options_.connect_timeout_s));
  // The read timeout bounds each wait for bytes: the silence before the first token
  // and between tokens, not the whole reply.
  set_timeout([&](time_t s, time_t us) { cli.set_read_timeout(s, us); }, idle);
  set_timeout([&](time_t s, time_t us) { cli.set_write_timeout(s, us); }, idle);
  cli.set_keep_alive(false);

  httplib::Request req;
  req.method = "POST";
  req.path = path_;
  for (const auto& [k, v] : auth_headers(c.provider, api_key_, options_.anthropic_version, stream))
    req.set_header(k, v);
  req.set_header("Content-Type", "application/json");
  req.body = body;

  reception rx(c.provider);
  rx.bounded = c.reply_timeout_s > 0;
  rx.deadline = rx.start + std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(rx.bounded ? c.reply_timeout_s : 0));
  rx.max_body = options_.max_body_bytes;
  rx.listen(req);

  limiter_->acquire();
  httplib::Result res = cli.send(req);
  limiter_->release();
  rx.silent = std::chrono::duration<double>(clock_type::now() - rx.last_byte).count();
  if (rx.stream_failed || rx.deadline_hit || rx.too_big) return stopped(rx);
  if (!res) {
    rx.error = res.error();
    return unanswered(rx);
  }
  rx.response = &*res;
  return answered(rx);
}

llm_client::attempt_outcome llm_client::stopped(const reception& rx) const {
  attempt_outcome out;
  out.streamed = rx.event_stream;
  out.status = 0;
  if (rx.stream_failed) {
    // An error event after the 200: the provider's own type decides.
    const stream_error* e = rx.decoder.failure();
    if (e) {
      nlohmann::json err = {{"type", e->type}, {"message", e->message}};
      if (e->code) err["code"] = e->code;
      out.api_error = classify_api_error(0, nlohmann::json{{"error", err}}.dump());
      out.retryable = out.api_error->retryable;
      out.transport_error = rx.stream_problem;
    } else {
      out.retryable = false;  // the stream is not the provider's format
      out.transport_error = "the stream could not be read: " + rx.stream_problem;
    }
    return out;
  }
  if (rx.deadline_hit) {
    out.retryable = true;
    out.transport_error = "the reply took longer than coder.llm.reply_timeout_s (" +
                          fmt_seconds(options_.llm.reply_timeout_s) + "); it was still arriving after " +
                          std::to_string(rx.bytes) + " bytes";
    out.timed_out = true;
    return out;
  }
  out.transport_error = "the reply is larger than " + std::to_string(options_.max_body_bytes >> 20) + " MiB";
  return out;
}

llm_client::attempt_outcome llm_client::unanswered(const reception& rx) const {
  const double idle = options_.llm.timeout_s;
  const httplib::Error err = rx.error;
  attempt_outcome out;
  out.streamed = rx.event_stream;
  out.retryable = true;
  out.status = 0;
  if (err == httplib::Error::Connection) {
    out.transport_error =
        "cannot connect to " + endpoint_.origin() + " (connection refused or host unreachable: is the server running?)";
  } else if (err == httplib::Error::ConnectionTimeout ||
             ((err == httplib::Error::Read || err == httplib::Error::Write) && rx.silent >= 0.9 * idle)) {
    out.timed_out = true;
    if (rx.bytes == 0)
      out.transport_error = "no reply within " + fmt_seconds(idle) +
                            " (coder.llm.timeout_s: the longest the server may stay silent; the first token "
                            "of a long prompt takes longest)";
    else
      out.transport_error = "the server went silent for " + fmt_seconds(idle) + " after " +
                            std::to_string(rx.decoder.events()) + " events of its reply (coder.llm.timeout_s)";
  } else if (err == httplib::Error::Read && rx.status != 0) {
    out.transport_error = "the connection closed mid-reply, after " + std::to_string(rx.bytes) + " bytes" +
                          (rx.event_stream ? " (" + std::to_string(rx.decoder.events()) + " stream events)" : "");
  } else {
    out.transport_error = httplib::to_string(err);
    if (err == httplib::Error::SSLServerVerification || err == httplib::Error::SSLLoadingCerts) out.retryable = false;
  }
  return out;
}

llm_client::attempt_outcome llm_client::answered(reception& rx) const {
  const httplib::Response& res = *rx.response;
  attempt_outcome out;
  out.streamed = rx.event_stream;
  out.status = rx.status;
  auto header = [&](const char* name) { return res.has_header(name) ? res.get_header_value(name) : ""; };
  if (auto ms = header("retry-after-ms"); !ms.empty())
    if (auto v = parse_retry_after(ms)) out.retry_after_s = *v / 1000.0;
  if (!out.retry_after_s)
    if (auto v = header("Retry-After"); !v.empty()) out.retry_after_s = parse_retry_after(v);

  if (out.status >= 200 && out.status < 300) {
    if (rx.event_stream) {
      if (auto st = rx.decoder.finish(); !st) {
        out.status = 0;
        out.retryable = true;
        out.transport_error = st.message();
        return out;
      }
      out.reply = rx.decoder.reply();
      out.usage_seen = rx.decoder.usage_seen();
      return out;
    }
    auto decoded = decode_chat_body(options_.llm.provider, rx.raw);
    if (!decoded) {
      out.transport_error = http_status_text(out.status) + " but " + decoded.message();
      out.status = 0;
      return out;
    }
    out.usage_seen = decoded->input_tokens > 0 || decoded->output_tokens > 0;
    out.reply = std::move(*decoded);
    return out;
  }
  out.body = std::move(rx.raw);
  out.api_error = classify_api_error(out.status, out.body);
  out.retryable = out.api_error->retryable;
  return out;
}

void llm_client::learn_context(int64_t tokens, const std::string& source) {
  std::lock_guard lock(context_mu_);
  if (context_ && *context_ <= tokens) return;
  context_ = tokens;
  context_source_ = source;
  spdlog::info("llm: context of model '{}': {} tokens ({})", options_.llm.model, tokens, source);
}

void llm_client::probe_context() {
  const llm_config& c = options_.llm;
  if (c.context_tokens > 0) return learn_context(c.context_tokens, "coder.llm.context_tokens");
  if (auto known = known_context(c.provider, c.model))
    return learn_context(*known, "the window of Anthropic's claude models");
  if (c.provider != "openai") return;
  httplib::Client cli(endpoint_.origin());
  const double t = std::min(options_.probe_timeout_s, c.timeout_s);
  set_timeout([&](time_t s, time_t us) { cli.set_connection_timeout(s, us); }, t);
  set_timeout([&](time_t s, time_t us) { cli.set_read_timeout(s, us); }, t);
  cli.set_keep_alive(false);
  httplib::Headers headers;
  for (const auto& [k, v] : auth_headers(c.provider, api_key_, options_.anthropic_version)) headers.emplace(k, v);
  // {base}/models where the chat path is {base}/chat/completions.
  std::string base = path_.substr(0, path_.size() - std::string("/chat/completions").size());
  if (auto r = cli.Get((base + "/models").c_str(), headers); r && r->status == 200)
    if (auto n = context_from_models(r->body, c.model))
      return learn_context(*n, "the server's " + base + "/models (max_model_len)");
  if (auto r = cli.Get("/props", headers); r && r->status == 200)
    if (auto n = context_from_props(r->body)) return learn_context(*n, "the server's /props (n_ctx)");
  spdlog::info(
      "llm: the server does not say the context of model '{}'; prompts are sent unchecked "
      "(set coder.llm.context_tokens to check them)",
      c.model);
}

std::optional<int64_t> llm_client::context_tokens() {
  std::call_once(probe_once_, [this] { probe_context(); });
  std::lock_guard lock(context_mu_);
  return context_;
}

std::string llm_client::context_source() {
  (void)context_tokens();
  std::lock_guard lock(context_mu_);
  return context_source_;
}

llm_client::prompt_room llm_client::room_for_prompt(std::optional<int> max_tokens) {
  prompt_room room;
  room.chars_per_token = estimator_.chars_per_token();
  const int reply = max_tokens.value_or(options_.llm.max_tokens);
  if (auto window = context_tokens()) {
    const int64_t left = *window - std::min<int64_t>(reply, *window / 2);
    room.tokens = std::max<int64_t>(1, left - context_margin(left));
  }
  if (options_.llm.prompt_tokens > 0)
    room.tokens = room.tokens ? std::min<int64_t>(room.tokens, options_.llm.prompt_tokens) : options_.llm.prompt_tokens;
  return room;
}

std::string llm_client::request_problem(const chat_request& request, int requested, double temperature) const {
  const llm_config& c = options_.llm;
  if (request.messages.empty()) return "the request has no messages";
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const auto& role = request.messages[i].role;
    if (role != "user" && role != "assistant")
      return "messages[" + std::to_string(i) + "].role is '" + role +
             "'; expected user or assistant (the system prompt has its own field)";
  }
  if (requested < 1) return "max_tokens must be >= 1";
  if (!(temperature >= 0)) return "temperature must be >= 0";
  if (!c.reasoning && c.provider == "anthropic" && temperature > 1)
    return "temperature " + std::to_string(temperature).substr(0, 4) +
           " is above Anthropic's maximum of 1 (coder.llm.temperature)";
  return "";
}

std::optional<chat_response> llm_client::cached_reply(const chat_request& request, const cache_key_fields& key,
                                                      int max_tokens) {
  auto hit = cache_->load(key);
  if (!hit) return std::nullopt;
  chat_response r;
  r.text = std::move(hit->text);
  r.input_tokens = hit->input_tokens;
  r.output_tokens = hit->output_tokens;
  r.model = std::move(hit->model);
  r.finish_reason = std::move(hit->finish_reason);
  r.cached = true;
  r.max_tokens = max_tokens;
  account(request, usage_counts{.requests = 1, .cache_hits = 1});
  spdlog::debug("llm {} for task '{}': cache hit", to_string(request.agent), request.task);
  return r;
}

chat_response llm_client::accept_reply(const chat_request& request, attempt_outcome& out, const reply_context& rc) {
  const llm_config& c = options_.llm;
  decoded_reply& d = *out.reply;
  chat_response r;
  r.text = std::move(d.text);
  r.input_tokens = d.input_tokens;
  r.output_tokens = d.output_tokens;
  r.model = d.model.empty() ? c.model : d.model;
  r.finish_reason = std::move(d.finish_reason);
  r.attempts = rc.attempts;
  r.max_tokens = rc.max_tokens;
  r.streamed = out.streamed;
  usage_counts delta{.requests = 1, .attempts = rc.attempts};
  if (out.usage_seen && r.input_tokens > 0) {
    estimator_.observe(rc.chars, r.input_tokens);
  } else if (!out.usage_seen) {
    // Ollama before 0.5 and some proxies send no usage in a stream: estimates,
    // said to be such, rather than zeros that read as free.
    r.usage_estimated = true;
    r.input_tokens = rc.prompt_estimate;
    r.output_tokens = estimator_.estimate(r.text.size());
    delta.notes.insert(
        "the server reported no token counts for some replies: their tokens are estimated "
        "from characters");
  }
  delta.input_tokens = r.input_tokens;
  delta.output_tokens = r.output_tokens;
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
  if (rc.cache_key) {
    if (auto st = cache_->store(*rc.cache_key, {r.text, r.input_tokens, r.output_tokens, r.model, r.finish_reason});
        !st)
      spdlog::warn("{}", st.message());
  }
  return r;
}

std::string llm_client::attempt_error(const attempt_outcome& out) const {
  const llm_config& c = options_.llm;
  if (out.status != 0 && out.api_error)
    return http_status_text(out.status) + ": " + out.api_error->text +
           api_error_hint(*out.api_error, c.provider, c.api_key_env);
  if (out.api_error) return out.transport_error + api_error_hint(*out.api_error, c.provider, c.api_key_env);
  return out.transport_error;
}

std::optional<int> llm_client::context_retry_tokens(const chat_request& request, const api_error_info& e,
                                                    const context_retry& cr) {
  if (e.context_tokens) learn_context(*e.context_tokens, "the server's context-length error");
  if (e.prompt_tokens) estimator_.observe(cr.chars, *e.prompt_tokens);
  if (cr.retried || !e.context_tokens) return std::nullopt;
  const int min_reply = cr.min_reply, requested = cr.requested, max_tokens = cr.max_tokens;
  const int64_t prompt = e.prompt_tokens.value_or(estimator_.estimate(request.system, request.messages));
  const int64_t room = *e.context_tokens - prompt - (e.prompt_tokens ? 16 : context_margin(prompt));
  if (room >= std::min(min_reply, requested) && room < max_tokens) return static_cast<int>(room);
  return std::nullopt;
}

result<chat_response> llm_client::chat(const chat_request& request) {
  const auto start = clock_type::now();
  const llm_config& c = options_.llm;
  const std::string who = "llm (" + describe() + ")";
  const int requested = request.max_tokens.value_or(c.max_tokens);
  const double temperature = request.temperature.value_or(c.temperature);

  auto refuse = [&](const std::string& why) -> result<chat_response> {
    account(request, usage_counts{.failures = 1});
    return ks::error{who + ": " + why};
  };
  if (auto why = request_problem(request, requested, temperature); !why.empty()) return refuse(why);

  // The context: lower max_tokens to what the prompt leaves, or refuse without sending.
  const size_t chars = request_chars(request.system, request.messages);
  const int64_t prompt_estimate = estimator_.estimate(request.system, request.messages);
  const int min_reply = std::max(1, options_.min_reply_tokens);
  const auto window = context_tokens();
  const reply_fit fit = fit_reply(prompt_estimate, requested, window.value_or(0), min_reply);
  if (!fit.problem.empty())
    return refuse(fit.problem + " (the context as " + context_source() +
                  " says); not sent: lower coder.llm.max_tokens or coder.llm.prompt_tokens, or give the server "
                  "a longer context (vLLM --max-model-len, llama.cpp -c, Ollama OLLAMA_CONTEXT_LENGTH)");
  int max_tokens = fit.max_tokens;
  if (fit.lowered)
    spdlog::info(
        "llm {} for task '{}': max_tokens lowered from {} to {}: the prompt (about {} tokens) and the "
        "reply must fit the context of {} tokens",
        to_string(request.agent), request.task, requested, max_tokens, prompt_estimate, *window);

  // Reasoning models take no temperature: the key records that none was sent.
  const double key_temperature = c.reasoning ? -1.0 : temperature;
  auto key_for = [&](int mt) {
    return cache_key_fields{c.provider, c.model, key_temperature, mt, request.system, request.messages};
  };
  const bool use_cache = cache_ && request.use_cache;
  if (use_cache) {
    if (auto r = cached_reply(request, key_for(max_tokens), max_tokens)) {
      r->latency_ms = seconds_since(start) * 1e3;
      return *r;
    }
  }

  body_options bo;
  bo.stream = c.stream;
  bo.max_completion_tokens = c.reasoning;
  bo.reasoning_effort = c.reasoning_effort;
  if (!c.reasoning) bo.temperature = temperature;

  const int max_attempts = 1 + c.max_retries;
  std::string last_error;
  int attempts = 0;  // HTTP attempts made
  int retries_left = c.max_retries;
  bool context_retried = false;
  for (;;) {
    ++attempts;
    bo.max_tokens = max_tokens;
    attempt_outcome out =
        attempt(encode_chat_body(c.provider, c.model, request.system, request.messages, bo), c.stream);
    if (out.reply) {
      std::optional<cache_key_fields> key;
      if (use_cache) key = key_for(max_tokens);
      chat_response r = accept_reply(request, out, {attempts, max_tokens, chars, prompt_estimate, key});
      r.latency_ms = seconds_since(start) * 1e3;
      spdlog::debug("llm {} for task '{}': {} attempt(s), {:.0f} ms, {} in / {} out tokens{}", to_string(request.agent),
                    request.task, attempts, r.latency_ms, r.input_tokens, r.output_tokens,
                    r.streamed ? ", streamed" : "");
      return r;
    }
    last_error = attempt_error(out);

    // A context error that names the window: remember it, and send once more with the
    // max_tokens that fits, at once (the request was wrong, not the server busy).
    if (out.api_error && out.api_error->kind == api_error_kind::context_length) {
      const api_error_info& e = *out.api_error;
      if (auto room = context_retry_tokens(request, e, {chars, min_reply, requested, max_tokens, context_retried})) {
        spdlog::info("{}: {}; sending again with max_tokens {}", who, last_error, *room);
        max_tokens = *room;
        context_retried = true;
        continue;
      }
      account(request, usage_counts{.failures = 1, .attempts = attempts});
      return ks::error{who + ": " + last_error + " (not retried)"};
    }
    if (!out.retryable) {
      account(request, usage_counts{.failures = 1, .attempts = attempts});
      const std::string why = out.status != 0 && out.status != 429
                                  ? " (a 4xx reply other than 408/429 means the request itself was "
                                    "refused; not retried)"
                                  : " (not retried)";
      return ks::error{who + ": " + last_error + why};
    }
    if (retries_left-- <= 0) break;
    double wait = backoff_s(attempts);
    if (out.retry_after_s) {
      if (*out.retry_after_s > options_.max_retry_after_s) {
        account(request, usage_counts{.failures = 1, .attempts = attempts});
        return ks::error{who + ": " + last_error + "; the server asks to retry after " +
                         fmt_seconds(*out.retry_after_s) + ", longer than the limit of " +
                         fmt_seconds(options_.max_retry_after_s) + "; giving up"};
      }
      wait = *out.retry_after_s;
    }
    spdlog::warn("{}: attempt {}/{} failed: {}; retrying in {}", who, attempts,
                 max_attempts + (context_retried ? 1 : 0), last_error, fmt_seconds(wait));
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  account(request, usage_counts{.failures = 1, .attempts = attempts});
  return ks::error{who + ": gave up after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") +
                   " in " + fmt_seconds(seconds_since(start)) +
                   " (coder.llm.max_retries = " + std::to_string(c.max_retries) + "); last error: " + last_error};
}

}  // namespace ks
