#include "llm_fake_server.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

#include <httplib.h>

namespace ks::testing {

using json = nlohmann::json;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string recorded_request::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string{} : it->second;
}

nlohmann::json recorded_request::body_json() const {
  return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
}

std::string openai_body(const std::string& text, int input_tokens, int output_tokens,
                        const std::string& model, const std::string& finish_reason) {
  return json{{"id", "chatcmpl-test"},
              {"object", "chat.completion"},
              {"created", 1700000000},
              {"model", model},
              {"choices",
               {{{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", text}}},
                 {"finish_reason", finish_reason}}}},
              {"usage",
               {{"prompt_tokens", input_tokens},
                {"completion_tokens", output_tokens},
                {"total_tokens", input_tokens + output_tokens}}}}
      .dump();
}

std::string anthropic_body(const std::string& text, int input_tokens, int output_tokens,
                           const std::string& model, const std::string& stop_reason) {
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

scripted_reply openai_ok(const std::string& text, int input_tokens, int output_tokens,
                         const std::string& model) {
  return {200, openai_body(text, input_tokens, output_tokens, model), {}, 0};
}

scripted_reply anthropic_ok(const std::string& text, int input_tokens, int output_tokens,
                            const std::string& model) {
  return {200, anthropic_body(text, input_tokens, output_tokens, model), {}, 0};
}

scripted_reply error_reply(int status, const std::string& message,
                           std::vector<std::pair<std::string, std::string>> headers) {
  return {status,
          json{{"type", "error"},
               {"error", {{"type", "test_error"}, {"message", message}}}}
              .dump(),
          std::move(headers), 0};
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
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    handle(req, status, body, headers);
    hres.status = status;
    for (const auto& [k, v] : headers) hres.set_header(k, v);
    hres.set_content(body, "application/json");
  });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("llm_fake_server: cannot bind 127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 2000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
  if (!body.contains("model") || !body["model"].is_string() ||
      body["model"].get<std::string>().empty())
    return "model missing or not a non-empty string";
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return "messages missing, not an array, or empty";
  if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() ||
      body["max_tokens"].get<int64_t>() < 1)
    return "max_tokens missing or not a positive integer";
  if (body.contains("temperature") && !body["temperature"].is_number())
    return "temperature is not a number";
  size_t i = 0;
  for (const auto& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
        !m.contains("content") || !m["content"].is_string())
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

void llm_fake_server::handle(const recorded_request& req, int& status, std::string& body,
                             std::vector<std::pair<std::string, std::string>>& headers) {
  const int now = ++in_flight_;
  int prev = max_in_flight_.load();
  while (now > prev && !max_in_flight_.compare_exchange_weak(prev, now)) {
  }
  scripted_reply reply;
  const std::string problem = validate(req);
  {
    std::lock_guard lock(mu_);
    requests_.push_back(req);
    if (!problem.empty()) {
      validation_errors_.push_back(problem);
      reply = error_reply(400, "fake server: malformed request: " + problem);
    } else if (handler_) {
      // called below, outside the lock
    } else if (!script_.empty()) {
      reply = std::move(script_.front());
      script_.pop_front();
    } else {
      reply = default_;
    }
  }
  if (problem.empty() && handler_) reply = handler_(req);
  if (reply.delay_s > 0) {
    std::unique_lock lock(mu_);
    stop_cv_.wait_for(lock, std::chrono::duration<double>(reply.delay_s),
                      [&] { return stopping_; });
  }
  --in_flight_;
  status = reply.status;
  body = reply.body;
  headers = reply.headers;
}

}  // namespace ks::testing
