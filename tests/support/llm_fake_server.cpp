#include "tests/support/llm_fake_server.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

#include <httplib.h>

namespace ks::testing {

using json = nlohmann::json;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string recorded_request::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string{} : it->second;
}

nlohmann::json recorded_request::body_json() const {
  return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
}

std::string openai_body(const std::string& text, int input_tokens, int output_tokens, const std::string& model,
                        const std::string& finish_reason) {
  return json{
      {"id", "chatcmpl-test"},
      {"object", "chat.completion"},
      {"created", 1700000000},
      {"model", model},
      {"choices",
       {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}}, {"finish_reason", finish_reason}}}},
      {"usage",
       {{"prompt_tokens", input_tokens},
        {"completion_tokens", output_tokens},
        {"total_tokens", input_tokens + output_tokens}}}}
      .dump();
}

std::string anthropic_body(const std::string& text, int input_tokens, int output_tokens, const std::string& model,
                           const std::string& stop_reason) {
  return json{{"id", "msg_test"},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", {{{"type", "text"}, {"text", text}}}},
              {"stop_reason", stop_reason},
              {"stop_sequence", nullptr},
              {"usage", {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}}
      .dump();
}

scripted_reply openai_ok(const std::string& text, int input_tokens, int output_tokens, const std::string& model) {
  scripted_reply r{200, openai_body(text, input_tokens, output_tokens, model), {}, 0};
  r.reply = model_text{"openai", text, input_tokens, output_tokens, model, ""};
  return r;
}

scripted_reply anthropic_ok(const std::string& text, int input_tokens, int output_tokens, const std::string& model) {
  scripted_reply r{200, anthropic_body(text, input_tokens, output_tokens, model), {}, 0};
  r.reply = model_text{"anthropic", text, input_tokens, output_tokens, model, ""};
  return r;
}

scripted_reply error_reply(int status, const std::string& message,
                           std::vector<std::pair<std::string, std::string>> headers) {
  return {status, json{{"type", "error"}, {"error", {{"type", "test_error"}, {"message", message}}}}.dump(),
          std::move(headers), 0};
}

scripted_reply raw_reply(int status, const std::string& body,
                         std::vector<std::pair<std::string, std::string>> headers) {
  return {status, body, std::move(headers), 0};
}

namespace {

std::string sse(const json& data, const std::string& event = "") {
  return (event.empty() ? "" : "event: " + event + "\n") + "data: " + data.dump() + "\n\n";
}

// The text in pieces of `n` characters, never splitting a UTF-8 sequence.
std::vector<std::string> pieces(const std::string& text, size_t n) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = std::min(text.size(), i + std::max<size_t>(n, 1));
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

}  // namespace

// What each server sends, event by event (their streaming code: vLLM's
// entrypoints/openai/serving_chat.py, llama.cpp's tools/server (to_json_oaicompat_chat_stream),
// Ollama's openai/openai.go (toChunk), Anthropic's "Streaming Messages" reference).
std::vector<std::string> stream_events(stream_style style, const model_text& r, size_t token_chars, bool usage) {
  std::vector<std::string> out;
  const auto parts = pieces(r.text, token_chars);
  const json counts = {{"prompt_tokens", r.input_tokens},
                       {"completion_tokens", r.output_tokens},
                       {"total_tokens", r.input_tokens + r.output_tokens}};
  const int64_t created = 1700000000;
  switch (style) {
    case stream_style::vllm: {
      auto chunk = [&](json delta, json finish) {
        return json{{"id", "chatcmpl-vllm"},
                    {"object", "chat.completion.chunk"},
                    {"created", created},
                    {"model", r.model},
                    {"choices", {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}}}};
      };
      out.push_back(sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr)));
      for (const auto& p : parts) out.push_back(sse(chunk({{"content", p}}, nullptr)));
      auto last = chunk({{"content", ""}}, r.finish_reason.empty() ? "stop" : r.finish_reason);
      last["choices"][0]["stop_reason"] = nullptr;
      out.push_back(sse(last));
      if (usage)
        out.push_back(sse({{"id", "chatcmpl-vllm"},
                           {"object", "chat.completion.chunk"},
                           {"created", created},
                           {"model", r.model},
                           {"choices", json::array()},
                           {"usage", counts}}));
      out.push_back("data: [DONE]\n\n");
      break;
    }
    case stream_style::llama_cpp: {
      auto chunk = [&](json delta, json finish) {
        return json{{"choices", {{{"finish_reason", finish}, {"index", 0}, {"delta", delta}}}},
                    {"created", created},
                    {"id", "chatcmpl-llama"},
                    {"model", r.model},
                    {"system_fingerprint", "b6000-test"},
                    {"object", "chat.completion.chunk"}};
      };
      out.push_back(sse(chunk({{"role", "assistant"}, {"content", nullptr}}, nullptr)));
      for (const auto& p : parts) out.push_back(sse(chunk({{"content", p}}, nullptr)));
      auto last = chunk(json::object(), r.finish_reason.empty() ? "stop" : r.finish_reason);
      // llama.cpp puts the counts on its last chunk whether or not they were asked for.
      last["usage"] = counts;
      last["timings"] = {
          {"prompt_n", r.input_tokens}, {"prompt_ms", 12.5}, {"predicted_n", r.output_tokens}, {"predicted_ms", 250.0}};
      out.push_back(sse(last));
      out.push_back("data: [DONE]\n\n");
      break;
    }
    case stream_style::ollama: {
      auto chunk = [&](const std::string& content, json finish) {
        return json{
            {"id", "chatcmpl-123"},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", r.model},
            {"system_fingerprint", "fp_ollama"},
            {"choices",
             {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", content}}}, {"finish_reason", finish}}}}};
      };
      for (const auto& p : parts) out.push_back(sse(chunk(p, nullptr)));
      out.push_back(sse(chunk("", r.finish_reason.empty() ? "stop" : r.finish_reason)));
      if (usage)
        out.push_back(sse({{"id", "chatcmpl-123"},
                           {"object", "chat.completion.chunk"},
                           {"created", created},
                           {"model", r.model},
                           {"system_fingerprint", "fp_ollama"},
                           {"choices", json::array()},
                           {"usage", counts}}));
      out.push_back("data: [DONE]\n\n");
      break;
    }
    case stream_style::anthropic: {
      out.push_back(sse({{"type", "message_start"},
                         {"message",
                          {{"id", "msg_test"},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"content", json::array()},
                           {"model", r.model},
                           {"stop_reason", nullptr},
                           {"stop_sequence", nullptr},
                           {"usage", {{"input_tokens", r.input_tokens}, {"output_tokens", 1}}}}}},
                        "message_start"));
      out.push_back(
          sse({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}},
              "content_block_start"));
      out.push_back("event: ping\ndata: {\"type\": \"ping\"}\n\n");
      for (const auto& p : parts)
        out.push_back(
            sse({{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", p}}}},
                "content_block_delta"));
      out.push_back(sse({{"type", "content_block_stop"}, {"index", 0}}, "content_block_stop"));
      out.push_back(
          sse({{"type", "message_delta"},
               {"delta",
                {{"stop_reason", r.finish_reason.empty() ? "end_turn" : r.finish_reason}, {"stop_sequence", nullptr}}},
               {"usage", {{"output_tokens", r.output_tokens}}}},
              "message_delta"));
      out.push_back(sse({{"type", "message_stop"}}, "message_stop"));
      break;
    }
  }
  return out;
}

llm_fake_server::llm_fake_server() : server_(std::make_unique<httplib::Server>()) {
  default_ = error_reply(500, "fake server: script exhausted");
  // Enough workers that the client's in-flight limit, not the server, is what bounds
  // concurrency in the tests.
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
  server_->Post(".*", [this](const httplib::Request& hreq, httplib::Response& hres) {
    recorded_request req;
    req.method = hreq.method;
    req.path = hreq.path;
    for (const auto& [k, v] : hreq.headers) req.headers[lower(k)] = v;
    req.body = hreq.body;
    scripted_reply reply = handle(req);
    hres.status = reply.status;
    std::string content_type = "application/json";
    for (const auto& [k, v] : reply.headers) {
      if (lower(k) == "content-type")
        content_type = v;
      else
        hres.set_header(k, v);
    }
    const json body = req.body_json();
    const bool anthropic = ends_with(req.path, "/messages");
    const bool wants_stream = body.is_object() && body.value("stream", false);
    if (!reply.reply) {
      hres.set_content(reply.body, content_type.c_str());
      return;
    }
    model_text text = *reply.reply;
    {
      std::lock_guard lock(mu_);
      if (count_tokens_) {
        text.input_tokens = static_cast<int>(tokens_of(body));
        text.output_tokens = static_cast<int>((text.text.size() + 3) / 4);
      }
    }
    if (!wants_stream) {
      hres.set_content(text.provider == "anthropic"
                           ? anthropic_body(text.text, text.input_tokens, text.output_tokens, text.model,
                                            text.finish_reason.empty() ? "end_turn" : text.finish_reason)
                           : openai_body(text.text, text.input_tokens, text.output_tokens, text.model,
                                         text.finish_reason.empty() ? "stop" : text.finish_reason),
                       "application/json");
      return;
    }
    stream_style style;
    {
      std::lock_guard lock(mu_);
      style = reply.style.value_or(anthropic ? stream_style::anthropic : style_);
    }
    const bool usage =
        style == stream_style::anthropic || style == stream_style::llama_cpp ||
        (reply.stream_usage && body.contains("stream_options") && body["stream_options"].value("include_usage", false));
    auto events = stream_events(style, text, reply.token_chars, usage);
    const bool cut = reply.cut_after_events > 0 && reply.cut_after_events < events.size();
    if (cut) events.resize(reply.cut_after_events);
    std::vector<std::string> writes;
    if (reply.split_bytes > 0) {
      std::string all;
      for (const auto& e : events) all += e;
      for (size_t i = 0; i < all.size(); i += reply.split_bytes) writes.push_back(all.substr(i, reply.split_bytes));
    } else {
      writes = std::move(events);
    }
    hres.set_header("Cache-Control", "no-cache");
    const double delay = reply.token_delay_s;
    auto next = std::make_shared<size_t>(0);
    hres.set_chunked_content_provider(
        "text/event-stream", [this, writes = std::move(writes), delay, cut, next](size_t, httplib::DataSink& sink) {
          if (*next >= writes.size()) {
            if (cut) return false;  // closes the connection without the last chunk
            sink.done();
            return true;
          }
          if (delay > 0 && !sleep_for(delay)) return false;
          const std::string& w = writes[(*next)++];
          return sink.write(w.data(), w.size());
        });
  });
  // What vLLM and llama.cpp's server say about the context window.
  server_->Get(".*", [this](const httplib::Request& hreq, httplib::Response& hres) {
    ++gets_;
    int64_t window;
    stream_style style;
    {
      std::lock_guard lock(mu_);
      window = context_window_;
      style = context_style_;
    }
    hres.status = 404;
    if (window <= 0) return hres.set_content(R"({"error":"not found"})", "application/json");
    if (ends_with(hreq.path, "/models")) {
      hres.status = 200;
      if (style == stream_style::llama_cpp)
        // llama.cpp's /v1/models says the model's *training* length only.
        return hres.set_content(json{{"object", "list"},
                                     {"data",
                                      {{{"id", "test-model"},
                                        {"object", "model"},
                                        {"created", 1735142223},
                                        {"owned_by", "llamacpp"},
                                        {"meta", {{"n_ctx_train", 131072}, {"n_vocab", 151936}}}}}}}
                                    .dump(),
                                "application/json");
      return hres.set_content(json{{"object", "list"},
                                   {"data",
                                    {{{"id", "test-model"},
                                      {"object", "model"},
                                      {"created", 1735142223},
                                      {"owned_by", "vllm"},
                                      {"root", "/models/test-model"},
                                      {"parent", nullptr},
                                      {"max_model_len", window},
                                      {"permission", json::array()}}}}}
                                  .dump(),
                              "application/json");
    }
    if (hreq.path == "/props" && style == stream_style::llama_cpp) {
      hres.status = 200;
      return hres.set_content(
          json{{"default_generation_settings", {{"n_ctx", window}, {"params", {{"n_predict", -1}}}}},
               {"total_slots", 1},
               {"model_path", "/models/test-model.gguf"},
               {"build_info", "b6000-test"}}
              .dump(),
          "application/json");
    }
    hres.set_content(R"({"error":{"code":404,"message":"File Not Found","type":"not_found_error"}})",
                     "application/json");
  });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("llm_fake_server: cannot bind 127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 2000 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

llm_fake_server::~llm_fake_server() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string llm_fake_server::url(const std::string& base_path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + base_path;
}

void llm_fake_server::push(scripted_reply reply) {
  std::lock_guard lock(mu_);
  script_.push_back(std::move(reply));
}

void llm_fake_server::set_default(scripted_reply reply) {
  std::lock_guard lock(mu_);
  default_ = std::move(reply);
}

void llm_fake_server::set_handler(std::function<scripted_reply(const recorded_request&)> handler) {
  std::lock_guard lock(mu_);
  handler_ = std::move(handler);
}

void llm_fake_server::set_stream_style(stream_style style) {
  std::lock_guard lock(mu_);
  style_ = style;
}

void llm_fake_server::set_context_window(int64_t tokens, stream_style style) {
  std::lock_guard lock(mu_);
  context_window_ = tokens;
  context_style_ = style;
}

void llm_fake_server::count_tokens(bool on) {
  std::lock_guard lock(mu_);
  count_tokens_ = on;
}

void llm_fake_server::reasoning_model(bool on) {
  std::lock_guard lock(mu_);
  reasoning_model_ = on;
}

size_t llm_fake_server::get_count() const { return gets_.load(); }

int64_t llm_fake_server::tokens_of(const json& body) {
  size_t chars = 0;
  if (body.contains("system") && body["system"].is_string())
    chars += body["system"].get_ref<const std::string&>().size();
  if (body.contains("messages") && body["messages"].is_array())
    for (const auto& m : body["messages"])
      if (m.contains("content") && m["content"].is_string()) chars += m["content"].get_ref<const std::string&>().size();
  return static_cast<int64_t>((chars + 3) / 4);
}

bool llm_fake_server::sleep_for(double seconds) {
  std::unique_lock lock(mu_);
  return !stop_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping_; });
}

std::vector<recorded_request> llm_fake_server::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t llm_fake_server::request_count() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

std::vector<std::string> llm_fake_server::validation_errors() const {
  std::lock_guard lock(mu_);
  return validation_errors_;
}

std::string llm_fake_server::validate(const recorded_request& req) const {
  const bool openai = ends_with(req.path, "/chat/completions");
  const bool anthropic = ends_with(req.path, "/messages");
  if (!openai && !anthropic) return "unknown path " + req.path;
  if (req.header("content-type").rfind("application/json", 0) != 0)
    return "Content-Type is '" + req.header("content-type") + "', not application/json";
  const json body = req.body_json();
  if (!body.is_object()) return "the body is not a JSON object";
  if (!body.contains("model") || !body["model"].is_string() || body["model"].get<std::string>().empty())
    return "model missing or not a non-empty string";
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return "messages missing, not an array, or empty";
  const char* limit = openai && body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!body.contains(limit) || !body[limit].is_number_integer() || body[limit].get<int64_t>() < 1)
    return std::string(limit) + " missing or not a positive integer";
  if (body.contains("max_tokens") && body.contains("max_completion_tokens"))
    return "both max_tokens and max_completion_tokens";
  if (body.contains("temperature") && !body["temperature"].is_number()) return "temperature is not a number";
  if (body.contains("stream") && !body["stream"].is_boolean()) return "stream is not a boolean";
  if (body.contains("stream_options")) {
    if (anthropic) return "stream_options is not an Anthropic field";
    if (!body["stream_options"].is_object()) return "stream_options is not an object";
    if (!body.value("stream", false)) return "stream_options without stream: true";
  }
  if (body.contains("reasoning_effort")) {
    const json& e = body["reasoning_effort"];
    if (anthropic || !e.is_string() || (e != "minimal" && e != "low" && e != "medium" && e != "high"))
      return "reasoning_effort is not one of minimal, low, medium, high";
  }
  size_t i = 0;
  for (const auto& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return "messages[" + std::to_string(i) + "] is not {role, content}";
    const std::string role = m["role"];
    const bool system_ok = openai && i == 0;
    if (role != "user" && role != "assistant" && !(role == "system" && system_ok))
      return "messages[" + std::to_string(i) + "].role '" + role + "' is not allowed here";
    ++i;
  }
  if (anthropic) {
    if (req.header("anthropic-version").empty()) return "anthropic-version header missing";
    if (body.contains("system") && !body["system"].is_string()) return "system is not a string";
    if (body["messages"][0]["role"] != "user") return "the first message is not the user's";
  }
  return {};
}

// What a real server refuses before generating: parameters a reasoning model does
// not take (OpenAI's wording), a prompt that does not fit the window (each server's).
std::optional<scripted_reply> llm_fake_server::refusal(const recorded_request& req) const {
  const json body = req.body_json();
  bool reasoning;
  int64_t window;
  stream_style style;
  {
    std::lock_guard lock(mu_);
    reasoning = reasoning_model_;
    window = context_window_;
    style = ends_with(req.path, "/messages") ? stream_style::anthropic : context_style_;
  }
  if (reasoning && body.contains("max_tokens"))
    return raw_reply(400, json{{"error",
                                {{"message",
                                  "Unsupported parameter: 'max_tokens' is not supported with "
                                  "this model. Use 'max_completion_tokens' instead."},
                                 {"type", "invalid_request_error"},
                                 {"param", "max_tokens"},
                                 {"code", "unsupported_parameter"}}}}
                              .dump());
  if (reasoning && body.contains("temperature"))
    return raw_reply(
        400, json{{"error",
                   {{"message", "Unsupported value: 'temperature' does not support " + body["temperature"].dump() +
                                    " with this model. Only the default (1) value is supported."},
                    {"type", "invalid_request_error"},
                    {"param", "temperature"},
                    {"code", "unsupported_value"}}}}
                 .dump());
  if (window <= 0) return std::nullopt;
  const int64_t prompt = tokens_of(body);
  const int64_t reply = body.value("max_tokens", body.value("max_completion_tokens", int64_t{0}));
  switch (style) {
    case stream_style::vllm:
      if (prompt >= window)
        return raw_reply(400, json{{"error",
                                    {{"message", "This model's maximum context length is " + std::to_string(window) +
                                                     " tokens. However, your request has " + std::to_string(prompt) +
                                                     " input tokens. Please reduce the length of the input messages."},
                                     {"type", "BadRequestError"},
                                     {"param", nullptr},
                                     {"code", 400}}}}
                                  .dump());
      if (prompt + reply > window)
        return raw_reply(
            400, json{{"error",
                       {{"message", "'max_tokens' or 'max_completion_tokens' is too large: " + std::to_string(reply) +
                                        ". This model's maximum context length is " + std::to_string(window) +
                                        " tokens and your request has " + std::to_string(prompt) + " input tokens (" +
                                        std::to_string(reply) + " > " + std::to_string(window) + " - " +
                                        std::to_string(prompt) + "). None"},
                        {"type", "BadRequestError"},
                        {"param", nullptr},
                        {"code", 400}}}}
                     .dump());
      break;
    case stream_style::llama_cpp:
      // llama.cpp refuses only a prompt that does not fit; a long reply stops at the end
      // of the window (finish_reason "length").
      if (prompt >= window)
        return raw_reply(
            400,
            json{{"error",
                  {{"code", 400},
                   {"message", "request (" + std::to_string(prompt) + " tokens) exceeds the available context size (" +
                                   std::to_string(window) + " tokens), try increasing it"},
                   {"type", "exceed_context_size_error"},
                   {"n_prompt_tokens", prompt},
                   {"n_ctx", window}}}}
                .dump());
      break;
    case stream_style::anthropic:
      if (prompt > window)
        return raw_reply(400, json{{"type", "error"},
                                   {"error",
                                    {{"type", "invalid_request_error"},
                                     {"message", "prompt is too long: " + std::to_string(prompt) + " tokens > " +
                                                     std::to_string(window) + " maximum"}}}}
                                  .dump());
      if (prompt + reply > window)
        return raw_reply(
            400, json{{"type", "error"},
                      {"error",
                       {{"type", "invalid_request_error"},
                        {"message", "input length and `max_tokens` exceed context limit: " + std::to_string(prompt) +
                                        " + " + std::to_string(reply) + " > " + std::to_string(window) +
                                        ", decrease input length or `max_tokens` and try again"}}}}
                     .dump());
      break;
    case stream_style::ollama:
      break;  // Ollama cuts the prompt silently
  }
  return std::nullopt;
}

scripted_reply llm_fake_server::handle(const recorded_request& req) {
  const int now = ++in_flight_;
  int prev = max_in_flight_.load();
  while (now > prev && !max_in_flight_.compare_exchange_weak(prev, now)) {
  }
  scripted_reply reply;
  const std::string problem = validate(req);
  std::optional<scripted_reply> refused = problem.empty() ? refusal(req) : std::nullopt;
  bool use_handler = false;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(req);
    if (!problem.empty()) {
      validation_errors_.push_back(problem);
      reply = error_reply(400, "fake server: malformed request: " + problem);
    } else if (refused) {
      reply = std::move(*refused);
    } else if (handler_) {
      use_handler = true;  // called below, outside the lock
    } else if (!script_.empty()) {
      reply = std::move(script_.front());
      script_.pop_front();
    } else {
      reply = default_;
    }
  }
  if (use_handler) reply = handler_(req);
  if (reply.delay_s > 0) sleep_for(reply.delay_s);
  --in_flight_;
  return reply;
}

}  // namespace ks::testing
