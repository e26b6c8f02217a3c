#pragma once
// A scripted LLM API on loopback for tests: a real cpp-httplib server on 127.0.0.1
// (an ephemeral port) that answers like an OpenAI-compatible server
// (POST …/chat/completions) or like Anthropic's API (POST …/v1/messages), from a
// script of replies, and records every request it received.
//
// It also checks each request's form — JSON body, model, messages, max_tokens,
// temperature, headers — and answers 400 to one that is malformed, noting why in
// validation_errors(): a client that sends a wrong request cannot pass unnoticed.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace ks::testing {

struct recorded_request {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  std::string header(const std::string& lower_name) const;
  nlohmann::json body_json() const;  // the parsed body (null if it is not JSON)
};

struct scripted_reply {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  double delay_s = 0;  // wait before answering (cut short when the server stops)
};

// Bodies and replies as the real APIs send them.
std::string openai_body(const std::string& text, int input_tokens = 10, int output_tokens = 20,
                        const std::string& model = "test-model",
                        const std::string& finish_reason = "stop");
std::string anthropic_body(const std::string& text, int input_tokens = 10,
                           int output_tokens = 20, const std::string& model = "test-model",
                           const std::string& stop_reason = "end_turn");
scripted_reply openai_ok(const std::string& text, int input_tokens = 10, int output_tokens = 20,
                         const std::string& model = "test-model");
scripted_reply anthropic_ok(const std::string& text, int input_tokens = 10,
                            int output_tokens = 20, const std::string& model = "test-model");
// An error reply with the providers' error shape {"error": {"type", "message"}}.
scripted_reply error_reply(int status, const std::string& message,
                           std::vector<std::pair<std::string, std::string>> headers = {});

class llm_fake_server {
 public:
  llm_fake_server();
  ~llm_fake_server();
  llm_fake_server(const llm_fake_server&) = delete;
  llm_fake_server& operator=(const llm_fake_server&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT" + base_path.
  std::string url(const std::string& base_path = "") const;

  // Replies are used in order; when the script is empty, the default reply answers
  // (initially a 500 "script exhausted").
  void push(scripted_reply reply);
  void set_default(scripted_reply reply);
  // Replaces script and default: computes each reply from the request.
  void set_handler(std::function<scripted_reply(const recorded_request&)> handler);

  std::vector<recorded_request> requests() const;
  size_t request_count() const;
  int max_in_flight() const { return max_in_flight_.load(); }
  std::vector<std::string> validation_errors() const;

 private:
  void handle(const recorded_request& req, int& status, std::string& body,
              std::vector<std::pair<std::string, std::string>>& headers);
  std::string validate(const recorded_request& req) const;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::deque<scripted_reply> script_;
  scripted_reply default_;
  std::function<scripted_reply(const recorded_request&)> handler_;
  std::vector<recorded_request> requests_;
  std::vector<std::string> validation_errors_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
};

}  // namespace ks::testing
