// The LLM transport as real servers behave: Server-Sent Events as vLLM, llama.cpp's
// server, Ollama's /v1 and Anthropic frame them (byte-split anywhere, slow, cut off,
// with and without usage), the inactivity timeout, retries that honour Retry-After on
// 429/529 and on an error event mid-stream, each provider's error format for context
// length and authentication, the context window read from /v1/models and /props and
// respected before sending, and the reasoning-model parameters — against a real HTTP
// server on loopback (tests/support/llm_fake_server.hpp), plus the pure parsers without one.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "llm/api_error.hpp"
#include "llm/llm_client.hpp"
#include "llm/server_info.hpp"
#include "llm/sse_stream.hpp"
#include "llm/token_budget.hpp"
#include "tests/support/llm_fake_server.hpp"

using Catch::Matchers::Contains;
using ks::testing::anthropic_ok;
using ks::testing::error_reply;
using ks::testing::llm_fake_server;
using ks::testing::model_text;
using ks::testing::openai_ok;
using ks::testing::raw_reply;
using ks::testing::scripted_reply;
using ks::testing::stream_style;
using json = nlohmann::json;

namespace {

using clock_type = std::chrono::steady_clock;

const bool quiet_logs = [] {
  spdlog::set_level(spdlog::level::err);
  return true;
}();

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// A reply long enough to stream in many events: prose around a fenced kernel.
const std::string kReply =
    "Here is a ReLU with one element per thread — coalesced, bounds-checked (µs matter).\n\n"
    "```cuda\nextern \"C\" __global__ void relu_f32(const float* __restrict__ x, float* __restrict__ y, "
    "long long n) {\n  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] < 0.0f ? 0.0f : x[i];\n}\n```\n\n```yaml\nconstants:\n  N: x.numel\n"
    "outputs:\n  - {name: y, shape: [x.shape[0]], dtype: float32}\nsteps:\n  - kernel: relu_f32\n"
    "    grid: [ceil_div(N, 256)]\n    block: [256]\n    args: [x, y, {int64: N}]\n```\n";

ks::llm_client_options options(const std::string& endpoint, const std::string& provider = "openai") {
  ks::llm_client_options o;
  o.llm.provider = provider;
  o.llm.endpoint = endpoint;
  o.llm.model = "test-model";
  o.llm.timeout_s = 1.0;
  o.llm.max_retries = 2;
  o.llm.max_tokens = 512;
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  o.jitter_seed = 11;
  o.min_reply_tokens = 64;
  return o;
}

std::unique_ptr<ks::llm_client> client_for(ks::llm_client_options o) {
  auto c = ks::llm_client::create(std::move(o));
  INFO((c ? std::string() : c.message()));
  REQUIRE(c.ok());
  return std::move(c.value());
}

ks::chat_request request(const std::string& text = "Write a ReLU kernel.") {
  ks::chat_request r;
  r.system = "You are a CUDA expert.";
  r.messages.push_back({"user", text});
  r.task = "relu";
  return r;
}

void no_validation_errors(const llm_fake_server& server) {
  for (const auto& e : server.validation_errors()) UNSCOPED_INFO("server: " + e);
  REQUIRE(server.validation_errors().empty());
}

struct env_var {
  std::string name;
  env_var(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
  ~env_var() { ::unsetenv(name.c_str()); }
};

// The events of `style` for kReply, as one string.
std::string stream_of(stream_style style, bool usage = true) {
  model_text t;
  t.provider = style == stream_style::anthropic ? "anthropic" : "openai";
  t.text = kReply;
  t.input_tokens = 123;
  t.output_tokens = 45;
  std::string all;
  for (const auto& e : ks::testing::stream_events(style, t, 3, usage)) all += e;
  return all;
}

}  // namespace

// ---------------------------------------------------------------------------
// The SSE parser and the stream decoders, without a network.

TEST_CASE("SSE lines end in LF, CRLF or CR, comments are skipped, data lines join", "[llm][sse]") {
  ks::sse_parser p;
  auto events =
      p.feed(": keep-alive\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\ndata: x\rdata: y\r\r\ndata: [DONE]\n\n");
  REQUIRE(events.size() == 3);
  CHECK(events[0] == ks::sse_event{"a", "one\ntwo"});
  CHECK(events[1] == ks::sse_event{"", "x\ny"});
  CHECK(events[2] == ks::sse_event{"", "[DONE]"});
  CHECK(p.comments() == 1);
  CHECK(p.finish().empty());
  // An event whose blank line never came is handed over at the end, so that a
  // caller can tell a cut-off event from none.
  ks::sse_parser q;
  CHECK(q.feed("data: {\"a\":1}\n").empty());
  auto rest = q.finish();
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].data == "{\"a\":1}");
}

TEST_CASE("each server's stream decodes to the same reply, split at every byte boundary", "[llm][sse]") {
  struct style_case {
    stream_style style;
    const char* provider;
  };
  for (auto sc : {style_case{stream_style::vllm, "openai"}, style_case{stream_style::llama_cpp, "openai"},
                  style_case{stream_style::ollama, "openai"}, style_case{stream_style::anthropic, "anthropic"}}) {
    const std::string all = stream_of(sc.style);
    for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, all.size()}) {
      ks::chat_stream_decoder d(sc.provider);
      for (size_t i = 0; i < all.size(); i += piece) REQUIRE(d.feed(std::string_view(all).substr(i, piece)).ok());
      REQUIRE(d.finish().ok());
      INFO("style " << static_cast<int>(sc.style) << ", pieces of " << piece);
      CHECK(d.complete());
      CHECK(d.reply().text == kReply);
      CHECK(d.reply().model == "test-model");
      CHECK(d.usage_seen());
      CHECK(d.reply().input_tokens == 123);
      CHECK(d.reply().output_tokens == 45);
      CHECK(d.reply().finish_reason == (sc.style == stream_style::anthropic ? "end_turn" : "stop"));
    }
  }
}

TEST_CASE("stream decoding: reasoning deltas are not reply, errors and cuts are reported", "[llm][sse]") {
  ks::chat_stream_decoder r("openai");
  REQUIRE(r.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"let me think\"}}]}\n\n"
                 "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"answer\"},\"finish_reason\":\"stop\"}],"
                 "\"usage\":null}\n\n")
              .ok());
  REQUIRE(r.finish().ok());  // a finish_reason and the end: whole, even without [DONE]
  CHECK(r.reply().text == "answer");
  CHECK(r.reasoning_chars() == 12);
  CHECK_FALSE(r.usage_seen());

  ks::chat_stream_decoder t("anthropic");
  REQUIRE(t.feed("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
                 "{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
                 "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
                 "{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n")
              .ok());
  CHECK(t.reply().text == "ok");
  auto cut = t.finish();
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(cut.message(), Contains("message_stop"));
  CHECK_THAT(cut.message(), Contains("cut off"));

  ks::chat_stream_decoder overloaded("anthropic");
  auto st = overloaded.feed(
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
      "\"message\":\"Overloaded\"}}\n\n");
  REQUIRE_FALSE(st.ok());
  REQUIRE(overloaded.failure());
  CHECK(overloaded.failure()->type == "overloaded_error");

  ks::chat_stream_decoder vllm("openai");
  REQUIRE_FALSE(vllm.feed("data: {\"error\":{\"object\":\"error\",\"message\":\"engine dead\",\"type\":"
                          "\"InternalServerError\",\"code\":500}}\n\n")
                    .ok());
  CHECK(vllm.failure()->code == 500);

  ks::chat_stream_decoder garbage("openai");
  CHECK_THAT(garbage.feed("data: <html>\n\n").message(), Contains("not a JSON object"));
}

// ---------------------------------------------------------------------------
// Error formats, without a network.

TEST_CASE("context-length errors in each server's words, with their numbers", "[llm][errors]") {
  auto vllm = ks::classify_api_error(
      400,
      R"({"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None","type":"BadRequestError","param":null,"code":400}})");
  CHECK(vllm.kind == ks::api_error_kind::context_length);
  CHECK(vllm.context_tokens == 4096);
  CHECK(vllm.prompt_tokens == 2778);
  CHECK_FALSE(vllm.retryable);

  auto vllm_old = ks::classify_api_error(
      400,
      R"({"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (3000 in the messages, 2000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400})");
  CHECK(vllm_old.kind == ks::api_error_kind::context_length);
  CHECK(vllm_old.context_tokens == 4096);
  CHECK(vllm_old.prompt_tokens == 3000);

  auto llama = ks::classify_api_error(
      400,
      R"({"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}})");
  CHECK(llama.kind == ks::api_error_kind::context_length);
  CHECK(llama.context_tokens == 4096);
  CHECK(llama.prompt_tokens == 4476);

  auto openai = ks::classify_api_error(
      400,
      R"({"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})");
  CHECK(openai.kind == ks::api_error_kind::context_length);
  CHECK(openai.context_tokens == 128000);
  CHECK(openai.prompt_tokens == 130412);

  auto claude = ks::classify_api_error(
      400,
      R"({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 205000 tokens > 200000 maximum"}})");
  CHECK(claude.kind == ks::api_error_kind::context_length);
  CHECK(claude.context_tokens == 200000);
  CHECK(claude.prompt_tokens == 205000);
  CHECK(claude.text == "invalid_request_error: prompt is too long: 205000 tokens > 200000 maximum");
  auto claude_sum = ks::classify_api_error(
      400,
      R"({"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length or `max_tokens` and try again"}})");
  CHECK(claude_sum.context_tokens == 200000);
  CHECK(claude_sum.prompt_tokens == 197000);

  const std::string hint = ks::api_error_hint(vllm, "openai", "");
  CHECK_THAT(hint, Contains("4096 tokens"));
  CHECK_THAT(hint, Contains("coder.llm.max_tokens"));
  CHECK_THAT(hint, Contains("--max-model-len"));
}

TEST_CASE("authentication, quota, rate and overload errors in each provider's format", "[llm][errors]") {
  using k = ks::api_error_kind;
  auto openai = ks::classify_api_error(
      401,
      R"({"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})");
  CHECK(openai.kind == k::authentication);
  CHECK_FALSE(openai.retryable);
  CHECK_THAT(ks::api_error_hint(openai, "openai", "OPENAI_API_KEY"), Contains("OPENAI_API_KEY"));
  CHECK_THAT(ks::api_error_hint(openai, "openai", ""), Contains("no key was sent"));
  auto claude = ks::classify_api_error(
      401, R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})");
  CHECK(claude.kind == k::authentication);
  CHECK_THAT(ks::api_error_hint(claude, "anthropic", "ANTHROPIC_API_KEY"), Contains("sk-ant-"));
  CHECK(ks::classify_api_error(401, R"({"error":"Unauthorized"})").kind == k::authentication);  // vLLM --api-key
  CHECK(
      ks::classify_api_error(401, R"({"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}})")
          .kind == k::authentication);  // llama.cpp --api-key
  CHECK(ks::classify_api_error(403, R"({"type":"error","error":{"type":"permission_error","message":"no"}})").kind ==
        k::permission);
  auto ollama = ks::classify_api_error(
      404,
      R"({"error":{"message":"model \"qwen9\" not found, try pulling it first","type":"api_error","param":null,"code":null}})");
  CHECK(ollama.kind == k::not_found);
  CHECK_THAT(ks::api_error_hint(ollama, "openai", ""), Contains("ollama pull"));

  auto quota = ks::classify_api_error(
      429,
      R"({"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
  CHECK(quota.kind == k::quota);
  CHECK_FALSE(quota.retryable);
  auto rate = ks::classify_api_error(
      429,
      R"({"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}})");
  CHECK(rate.kind == k::rate_limit);
  CHECK(rate.retryable);
  auto overloaded =
      ks::classify_api_error(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  CHECK(overloaded.kind == k::overloaded);
  CHECK(overloaded.retryable);
  CHECK(ks::classify_api_error(503, R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})")
            .retryable);  // llama.cpp while it loads
  CHECK(ks::classify_api_error(0, R"({"error":{"type":"overloaded_error","message":"Overloaded"}})").retryable);
  CHECK_FALSE(ks::classify_api_error(400, R"({"error":{"message":"bad"}})").retryable);
}

TEST_CASE("the context window as vLLM's /v1/models and llama.cpp's /props say it", "[llm][context]") {
  CHECK(ks::context_from_models(R"({"object":"list","data":[{"id":"qwen","root":"/m/qwen","max_model_len":32768}]})",
                                "qwen") == 32768);
  CHECK(ks::context_from_models(R"({"data":[{"id":"a","max_model_len":1},{"id":"b","max_model_len":8192}]})", "b") ==
        8192);
  CHECK_FALSE(ks::context_from_models(R"({"data":[{"id":"m","meta":{"n_ctx_train":131072}}]})", "m"));
  CHECK(ks::context_from_props(R"({"default_generation_settings":{"n_ctx":4096},"total_slots":1})") == 4096);
  CHECK_FALSE(ks::context_from_props(R"({"total_slots":1})"));
  CHECK(ks::known_context("anthropic", "claude-sonnet-4-5") == 200000);
  CHECK_FALSE(ks::known_context("openai", "gpt-4o"));
}

TEST_CASE("token estimates calibrate to the server's counts, replies fit the window", "[llm][context]") {
  ks::token_estimator e;
  CHECK(e.estimate(3000) == 1000);
  e.observe(4000, 1000);
  CHECK(e.chars_per_token() == 4.0);
  e.observe(3500, 1000);  // the lowest ratio seen: estimates stay on the safe side
  CHECK(e.chars_per_token() == 3.5);
  e.observe(10, 1000);  // nonsense counts are ignored
  CHECK(e.chars_per_token() == 3.5);

  CHECK(ks::fit_reply(1000, 512, 0, 64).max_tokens == 512);     // no window: unchecked
  CHECK(ks::fit_reply(1000, 512, 8192, 64).max_tokens == 512);  // fits
  auto lowered = ks::fit_reply(3000, 2048, 4096, 256);
  CHECK(lowered.lowered);
  CHECK(lowered.max_tokens == 4096 - 3000 - ks::context_margin(3000));
  auto refused = ks::fit_reply(4000, 2048, 4096, 256);
  CHECK_FALSE(refused.problem.empty());
  CHECK_THAT(refused.problem, Contains("4096"));
}

// ---------------------------------------------------------------------------
// Streaming over HTTP.

TEST_CASE("streamed replies from each kind of server, as the client asks for them", "[llm][http][stream]") {
  for (auto style : {stream_style::vllm, stream_style::llama_cpp, stream_style::ollama}) {
    llm_fake_server server;
    server.set_stream_style(style);
    auto reply = openai_ok(kReply, 321, 54);
    reply.token_chars = 3;
    server.push(reply);
    auto client = client_for(options(server.url("/v1")));
    auto r = client->chat(request());
    INFO("style " << static_cast<int>(style) << ": " << (r ? std::string() : r.message()));
    REQUIRE(r.ok());
    CHECK(r->streamed);
    CHECK(r->text == kReply);
    CHECK(r->input_tokens == 321);
    CHECK(r->output_tokens == 54);
    CHECK_FALSE(r->usage_estimated);
    CHECK(r->finish_reason == "stop");
    no_validation_errors(server);
    const auto sent = server.requests().at(0);
    CHECK(sent.header("accept") == "text/event-stream");
    const json body = sent.body_json();
    CHECK(body["stream"] == true);
    CHECK(body["stream_options"] == json{{"include_usage", true}});
  }
  llm_fake_server claude;
  auto reply = anthropic_ok(kReply, 77, 66, "claude-test");
  reply.token_chars = 5;
  claude.push(reply);
  auto client = client_for(options(claude.url(), "anthropic"));
  auto r = client->chat(request());
  REQUIRE(r.ok());
  CHECK(r->streamed);
  CHECK(r->text == kReply);
  CHECK(r->input_tokens == 77);
  CHECK(r->output_tokens == 66);
  CHECK(r->finish_reason == "end_turn");
  no_validation_errors(claude);
  const json body = claude.requests().at(0).body_json();
  CHECK(body["stream"] == true);
  CHECK_FALSE(body.contains("stream_options"));
}

TEST_CASE("a stream re-chunked at 3-byte boundaries reads the same", "[llm][http][stream]") {
  llm_fake_server server;
  auto reply = openai_ok(kReply, 5, 6);
  reply.split_bytes = 3;
  server.push(reply);
  auto r = client_for(options(server.url("/v1")))->chat(request());
  REQUIRE(r.ok());
  CHECK(r->text == kReply);
}

TEST_CASE("without stream: the whole reply, no stream fields", "[llm][http][stream]") {
  llm_fake_server server;
  server.push(openai_ok(kReply, 5, 6));
  auto o = options(server.url("/v1"));
  o.llm.stream = false;
  auto r = client_for(o)->chat(request());
  REQUIRE(r.ok());
  CHECK_FALSE(r->streamed);
  CHECK(r->text == kReply);
  const json body = server.requests().at(0).body_json();
  CHECK_FALSE(body.contains("stream"));
  CHECK(server.requests().at(0).header("accept") == "application/json");
}

TEST_CASE("slow tokens: the timeout bounds each silence, not the whole reply", "[llm][http][stream][timeout]") {
  llm_fake_server server;
  auto reply = openai_ok(kReply, 5, 6);
  reply.token_chars = 16;      // ~30 events
  reply.token_delay_s = 0.06;  // ~1.8 s in all, each gap far below the timeout
  server.push(reply);
  auto o = options(server.url("/v1"));
  o.llm.timeout_s = 0.5;
  const auto t0 = clock_type::now();
  auto r = client_for(o)->chat(request());
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(seconds_since(t0) > 1.0);  // longer than the timeout, and still fine
  CHECK(r->attempts == 1);
  CHECK(r->text == kReply);

  // reply_timeout_s bounds the whole, when a user wants that.
  llm_fake_server bounded;
  bounded.set_default(reply);
  o.llm.endpoint = bounded.url("/v1");
  o.llm.reply_timeout_s = 0.5;
  o.llm.max_retries = 0;
  auto cut = client_for(o)->chat(request());
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(cut.message(), Contains("reply_timeout_s"));
}

TEST_CASE("a stream that goes silent is abandoned after timeout_s and retried", "[llm][http][stream][timeout]") {
  llm_fake_server server;
  auto stalled = openai_ok(kReply, 5, 6);
  stalled.token_chars = 200;
  stalled.token_delay_s = 1.5;  // the first event comes after 1.5 s
  server.push(stalled);
  server.push(openai_ok(kReply, 5, 6));
  auto o = options(server.url("/v1"));
  o.llm.timeout_s = 0.3;
  const auto t0 = clock_type::now();
  auto r = client_for(o)->chat(request());
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->attempts == 2);
  CHECK(seconds_since(t0) < 1.4);

  llm_fake_server silent;
  silent.set_default(stalled);
  o.llm.endpoint = silent.url("/v1");
  o.llm.max_retries = 1;
  auto e = client_for(o)->chat(request());
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.message(), Contains("coder.llm.timeout_s"));
  CHECK_THAT(e.message(), Contains("gave up after 2 attempts"));
}

TEST_CASE("a stream cut mid-reply is retried, and reported when it keeps happening", "[llm][http][stream]") {
  for (auto style : {stream_style::vllm, stream_style::anthropic}) {
    const bool claude = style == stream_style::anthropic;
    llm_fake_server server;
    auto cut = claude ? anthropic_ok(kReply, 5, 6) : openai_ok(kReply, 5, 6);
    cut.cut_after_events = 9;
    server.push(cut);
    server.push(claude ? anthropic_ok(kReply, 5, 6) : openai_ok(kReply, 5, 6));
    auto r = client_for(options(claude ? server.url() : server.url("/v1"), claude ? "anthropic" : "openai"))
                 ->chat(request());
    INFO((r ? std::string() : r.message()));
    REQUIRE(r.ok());
    CHECK(r->attempts == 2);
    CHECK(r->text == kReply);

    llm_fake_server always;
    always.set_default(cut);
    auto o = options(claude ? always.url() : always.url("/v1"), claude ? "anthropic" : "openai");
    o.llm.max_retries = 1;
    auto e = client_for(o)->chat(request());
    REQUIRE_FALSE(e.ok());
    CHECK_THAT(e.message(), Contains("closed mid-reply"));
    CHECK_THAT(e.message(), Contains("gave up after 2 attempts"));
  }
}

TEST_CASE("a server that sends no usage: tokens estimated, and said to be", "[llm][http][stream][usage]") {
  llm_fake_server server;
  server.set_stream_style(stream_style::ollama);
  auto reply = openai_ok(kReply, 999, 999);
  reply.stream_usage = false;  // Ollama before 0.5 ignored include_usage
  server.push(reply);
  auto client = client_for(options(server.url("/v1")));
  auto r = client->chat(request());
  REQUIRE(r.ok());
  CHECK(r->usage_estimated);
  CHECK(r->input_tokens > 0);
  CHECK(r->output_tokens == static_cast<int64_t>((kReply.size() + 2) / 3));
  const auto u = client->usage().task_total("relu");
  CHECK(u.output_tokens == r->output_tokens);
  CHECK(std::count_if(u.notes.begin(), u.notes.end(),
                      [](const std::string& n) { return n.find("estimated") != std::string::npos; }) == 1);
}

// ---------------------------------------------------------------------------
// Retries and errors over HTTP.

TEST_CASE("429 with Retry-After and Anthropic's 529, then a streamed reply", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(raw_reply(
      429,
      R"({"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}})",
      {{"retry-after", "1"}}));
  server.push(raw_reply(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"));
  server.push(anthropic_ok(kReply, 5, 6));
  const auto t0 = clock_type::now();
  auto r = client_for(options(server.url(), "anthropic"))->chat(request());
  REQUIRE(r.ok());
  CHECK(r->attempts == 3);
  CHECK(seconds_since(t0) >= 0.95);
}

TEST_CASE("an overloaded_error event after the 200 is retried", "[llm][http][retry][stream]") {
  // The error event itself, from a server that sends it (a raw event-stream body).
  llm_fake_server events;
  events.push(raw_reply(200,
                        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\","
                        "\"usage\":{\"input_tokens\":5}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":"
                        "{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
                        {{"Content-Type", "text/event-stream"}}));
  events.push(anthropic_ok(kReply, 5, 6));
  auto again = client_for(options(events.url(), "anthropic"))->chat(request());
  INFO((again ? std::string() : again.message()));
  REQUIRE(again.ok());
  CHECK(again->attempts == 2);
}

TEST_CASE("authentication failures name the key variable, are not retried, never leak the key", "[llm][http][errors]") {
  env_var key("KS_TRANSPORT_TEST_KEY", "sk-do-not-leak-123");
  llm_fake_server openai;
  openai.push(raw_reply(
      401,
      R"({"error":{"message":"Incorrect API key provided: sk-do-no***123.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})"));
  auto o = options(openai.url("/v1"));
  o.llm.api_key_env = "KS_TRANSPORT_TEST_KEY";
  auto e = client_for(o)->chat(request());
  REQUIRE_FALSE(e.ok());
  CHECK(openai.request_count() == 1);
  CHECK_THAT(e.message(), Contains("HTTP 401"));
  CHECK_THAT(e.message(), Contains("Incorrect API key provided"));
  CHECK_THAT(e.message(), Contains("check the key in the variable KS_TRANSPORT_TEST_KEY"));
  CHECK(e.message().find("sk-do-not-leak-123") == std::string::npos);

  llm_fake_server vllm;  // vLLM started with --api-key, and no key configured here
  vllm.push(raw_reply(401, R"({"error":"Unauthorized"})"));
  auto none = client_for(options(vllm.url("/v1")))->chat(request());
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.message(), Contains("no key was sent"));
}

TEST_CASE("a spent quota is not retried, a rate limit is", "[llm][http][errors]") {
  llm_fake_server server;
  server.push(raw_reply(
      429,
      R"({"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})"));
  auto e = client_for(options(server.url("/v1")))->chat(request());
  REQUIRE_FALSE(e.ok());
  CHECK(server.request_count() == 1);
  CHECK_THAT(e.message(), Contains("quota is spent"));
}

// ---------------------------------------------------------------------------
// The context window.

TEST_CASE("vLLM: the window from /v1/models lowers max_tokens, a prompt that cannot fit is not sent",
          "[llm][http][context]") {
  llm_fake_server server;
  server.set_context_window(2000, stream_style::vllm);
  server.set_default(openai_ok(kReply, 5, 6));
  auto o = options(server.url("/v1"));
  o.llm.max_tokens = 1800;
  auto client = client_for(o);
  CHECK(client->context_tokens() == 2000);
  CHECK_THAT(client->context_source(), Contains("/v1/models"));
  auto r = client->chat(request(std::string(3000, 'a')));  // ~1000 tokens at the initial 3 a token
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->max_tokens < 1800);
  CHECK(r->max_tokens >= 64);
  const json body = server.requests().at(0).body_json();
  CHECK(body["max_tokens"] == r->max_tokens);
  CHECK(server.requests().size() == 1);  // the server never refused it

  const size_t before = server.request_count();
  auto big = client->chat(request(std::string(9000, 'b')));
  REQUIRE_FALSE(big.ok());
  CHECK(server.request_count() == before);  // refused without a request
  CHECK_THAT(big.message(), Contains("not sent"));
  CHECK_THAT(big.message(), Contains("2000"));
  CHECK_THAT(big.message(), Contains("/v1/models"));
}

TEST_CASE("llama.cpp: n_ctx from /props, not the training length of /v1/models", "[llm][http][context]") {
  llm_fake_server server;
  server.set_context_window(3000, stream_style::llama_cpp);
  auto client = client_for(options(server.url("/v1")));
  CHECK(client->context_tokens() == 3000);
  CHECK_THAT(client->context_source(), Contains("/props"));
  CHECK(server.get_count() == 2);  // /v1/models, then /props; once
  (void)client->context_tokens();
  CHECK(server.get_count() == 2);
}

TEST_CASE("a context error that names the numbers: one immediate retry with the max_tokens that fits",
          "[llm][http][context]") {
  SECTION("vLLM, with a configured window that is wrong") {
    llm_fake_server server;
    server.set_context_window(1500, stream_style::vllm);
    server.set_default(openai_ok(kReply, 5, 6));
    auto o = options(server.url("/v1"));
    o.llm.context_tokens = 100000;  // the user's guess; the server knows better
    o.llm.max_tokens = 1400;
    o.llm.max_retries = 0;
    auto client = client_for(o);
    auto r = client->chat(request(std::string(2000, 'a')));  // 500 server tokens
    INFO((r ? std::string() : r.message()));
    REQUIRE(r.ok());
    REQUIRE(server.request_count() == 2);
    // The server counts 4 characters a token: (2000 + 22 of system) / 4 = 506 input tokens.
    CHECK(server.requests()[1].body_json()["max_tokens"] == 1500 - 506 - 16);
    CHECK(client->context_tokens() == 1500);  // learned for the next requests
    CHECK_THAT(client->context_source(), Contains("context-length error"));
  }
  SECTION("Anthropic, whose model name says nothing of its window") {
    llm_fake_server server;
    server.set_context_window(1200, stream_style::anthropic);
    server.set_default(anthropic_ok(kReply, 5, 6));
    auto o = options(server.url(), "anthropic");
    o.llm.model = "my-proxy-model";
    o.llm.max_tokens = 1000;
    auto r = client_for(o)->chat(request(std::string(1600, 'a')));
    INFO((r ? std::string() : r.message()));
    REQUIRE(r.ok());
    REQUIRE(server.request_count() == 2);
    CHECK(server.requests()[1].body_json()["max_tokens"] == 1200 - 406 - 16);
  }
  SECTION("a prompt that alone exceeds the window is reported, not retried") {
    llm_fake_server server;
    server.set_context_window(500, stream_style::llama_cpp);
    auto o = options(server.url("/v1"));
    o.llm.context_tokens = 100000;
    auto r = client_for(o)->chat(request(std::string(4000, 'a')));
    REQUIRE_FALSE(r.ok());
    CHECK(server.request_count() == 1);
    CHECK_THAT(r.message(), Contains("exceeds the available context size"));
    CHECK_THAT(r.message(), Contains("context of 500 tokens"));
    CHECK_THAT(r.message(), Contains("llama.cpp -c"));
  }
}

// ---------------------------------------------------------------------------
// Reasoning models.

TEST_CASE("reasoning models: max_completion_tokens and no temperature, by config", "[llm][http][reasoning]") {
  llm_fake_server server;
  server.reasoning_model();
  server.set_default(openai_ok(kReply, 5, 6));
  auto o = options(server.url("/v1"));
  auto refused = client_for(o)->chat(request());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.message(), Contains("max_completion_tokens"));
  CHECK(server.request_count() == 1);  // a 400: not retried

  o.llm.reasoning = true;
  o.llm.reasoning_effort = "high";
  auto r = client_for(o)->chat(request());
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  no_validation_errors(server);
  const json body = server.requests().back().body_json();
  CHECK(body["max_completion_tokens"] == 512);
  CHECK_FALSE(body.contains("max_tokens"));
  CHECK_FALSE(body.contains("temperature"));
  CHECK(body["reasoning_effort"] == "high");
}
