#pragma once
// A scripted LLM API on loopback for tests: a real cpp-httplib server on 127.0.0.1
// (an ephemeral port) that answers like an OpenAI-compatible server
// (POST …/chat/completions) or like Anthropic's API (POST …/v1/messages), from a
// script of replies, and records every request it received.
//
// It behaves like the real servers where a client can tell the difference:
// - a request with `"stream": true` gets its reply as Server-Sent Events over chunked
//   transfer encoding, event by event as the server it imitates sends them
//   (stream_style: vLLM, llama.cpp's server, Ollama's /v1, Anthropic), one event per
//   few characters ("tokens"), optionally slow (a delay per event), cut off after N
//   events (the connection closed mid-reply), or re-chunked at arbitrary byte
//   boundaries (a proxy's segmentation); without `stream` the same reply comes whole;
// - GET {base}/models answers like vLLM (max_model_len) and GET /props like llama.cpp
//   (default_generation_settings.n_ctx) when a context window is set;
// - with a context window set, a request whose prompt plus max_tokens does not fit is
//   refused with the 400 that server sends (vLLM's, llama.cpp's or Anthropic's body);
// - count_tokens(): usage counts the request's own characters (4 a token), so that
//   token totals measure the prompts the client really sent;
// - reasoning_model(): refuses max_tokens and temperature as OpenAI's o-series does.
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
#include <optional>
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

// How a streamed reply is framed: as each server frames it (see the .cpp for the
// events each sends).
enum class stream_style { vllm, llama_cpp, ollama, anthropic };

// A model's reply in words, which the server sends whole or streamed.
struct model_text {
  std::string provider = "openai";  // "openai" | "anthropic": the body format
  std::string text;
  int input_tokens = 10;
  int output_tokens = 20;
  std::string model = "test-model";
  std::string finish_reason;  // "" : stop (openai) / end_turn (anthropic)
};

struct scripted_reply {
  scripted_reply() = default;
  scripted_reply(int status_, std::string body_, std::vector<std::pair<std::string, std::string>> headers_ = {},
                 double delay_s_ = 0)
      : status(status_), body(std::move(body_)), headers(std::move(headers_)), delay_s(delay_s_) {}

  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  double delay_s = 0;  // wait before answering (cut short when the server stops)

  // Set by openai_ok / anthropic_ok: the reply in words. A request with "stream":
  // true gets it as events (body is then not used).
  std::optional<model_text> reply;
  std::optional<stream_style> style;  // default: the server's (anthropic for Anthropic)
  size_t token_chars = 4;             // characters per streamed content event
  double token_delay_s = 0;           // wait before each event
  size_t cut_after_events = 0;        // >0: close the connection after this many events
  size_t split_bytes = 0;             // >0: write the stream in pieces of this many bytes
  bool stream_usage = true;           // include the usage (vLLM/Ollama only when asked)
};

// Bodies and replies as the real APIs send them.
std::string openai_body(const std::string& text, int input_tokens = 10, int output_tokens = 20,
                        const std::string& model = "test-model", const std::string& finish_reason = "stop");
std::string anthropic_body(const std::string& text, int input_tokens = 10, int output_tokens = 20,
                           const std::string& model = "test-model", const std::string& stop_reason = "end_turn");
scripted_reply openai_ok(const std::string& text, int input_tokens = 10, int output_tokens = 20,
                         const std::string& model = "test-model");
scripted_reply anthropic_ok(const std::string& text, int input_tokens = 10, int output_tokens = 20,
                            const std::string& model = "test-model");
// An error reply with the providers' error shape {"error": {"type", "message"}}.
scripted_reply error_reply(int status, const std::string& message,
                           std::vector<std::pair<std::string, std::string>> headers = {});
// An error body exactly as `style`'s server sends it.
scripted_reply raw_reply(int status, const std::string& body,
                         std::vector<std::pair<std::string, std::string>> headers = {});

// The SSE events (each "...\n\n") that `style`'s server sends for `reply`; `usage`:
// whether the request asked for usage (stream_options.include_usage).
std::vector<std::string> stream_events(stream_style style, const model_text& reply, size_t token_chars, bool usage);

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

  // How streamed OpenAI-compatible replies are framed (default vLLM's).
  void set_stream_style(stream_style style);
  // The model's context window: GET /v1/models and /props say it, and a request that
  // does not fit is refused as `style`'s server refuses it. 0: none (no GET answers).
  void set_context_window(int64_t tokens, stream_style style = stream_style::vllm);
  // Usage from the request's and the reply's own characters (4 a token).
  void count_tokens(bool on = true);
  // Refuse max_tokens and temperature (OpenAI's reasoning models).
  void reasoning_model(bool on = true);
  // The server's token count of a request body (its text, 4 characters a token).
  static int64_t tokens_of(const nlohmann::json& body);

  std::vector<recorded_request> requests() const;
  size_t get_count() const;  // GET requests (context probes) received
  size_t request_count() const;
  int max_in_flight() const { return max_in_flight_.load(); }
  std::vector<std::string> validation_errors() const;

 private:
  scripted_reply handle(const recorded_request& req);
  std::string validate(const recorded_request& req) const;
  std::optional<scripted_reply> refusal(const recorded_request& req) const;
  bool sleep_for(double seconds);  // false when the server is stopping

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
  stream_style style_ = stream_style::vllm;
  int64_t context_window_ = 0;
  stream_style context_style_ = stream_style::vllm;
  bool count_tokens_ = false;
  bool reasoning_model_ = false;
  std::atomic<size_t> gets_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
};

}  // namespace ks::testing
