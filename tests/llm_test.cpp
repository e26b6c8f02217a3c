// The LLM backend against a real HTTP server on loopback (tests/support/llm_fake_server.hpp):
// request formats of both providers, retries and back-off (5xx, 429 with Retry-After,
// timeouts, connection errors), no retry on other 4xx, the shared in-flight limit,
// token and cost accounting, the on-disk cache, the API key — and, without a network,
// endpoint parsing, the reply parser, the format-repair round trip and the prompts.

#include <catch2/catch.hpp>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "llm/candidate_request.hpp"
#include "llm/endpoint.hpp"
#include "llm/llm_client.hpp"
#include "llm/prompts.hpp"
#include "llm/provider_format.hpp"
#include "llm/response_parser.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "policy/skill_library.hpp"
#include "tests/support/llm_fake_server.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using ks::testing::anthropic_ok;
using ks::testing::error_reply;
using ks::testing::llm_fake_server;
using ks::testing::openai_ok;
using ks::testing::scripted_reply;
using json = nlohmann::json;

namespace {

using clock_type = std::chrono::steady_clock;

// The client logs retries and unpriced models as warnings; the tests provoke plenty.
const bool quiet_logs = [] {
  spdlog::set_level(spdlog::level::err);
  return true;
}();

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// A good candidate reply: prose, the source, the plan.
const std::string relu_source =
    "extern \"C\" __global__ void relu_f32(const float* __restrict__ x, float* __restrict__ y,\n"
    "                                    long long n) {\n"
    "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] < 0.0f ? 0.0f : x[i];\n"
    "}\n";
const std::string relu_plan =
    "constants:\n"
    "  BLOCK: 256\n"
    "  N: x.numel\n"
    "outputs:\n"
    "  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}\n"
    "steps:\n"
    "  - kernel: relu_f32\n"
    "    grid: [ceil_div(N, BLOCK)]\n"
    "    block: [BLOCK]\n"
    "    args: [x, y, {int64: N}]\n";

std::string reply_with(const std::string& source, const std::string& plan,
                       const std::string& prose = "Here is a coalesced ReLU, one element per thread.") {
  return prose + "\n\n```cuda\n" + source + "```\n\nAnd the launch plan:\n\n```yaml\n" + plan + "```\n";
}

const std::string good_reply = reply_with(relu_source, relu_plan);

// A scratch directory removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static std::atomic<int> n{0};
    path = fs::temp_directory_path() / ("ks_llm_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Options for a test client: fast back-off, short timeout.
ks::llm_client_options test_options(const std::string& endpoint, const std::string& provider = "openai") {
  ks::llm_client_options o;
  o.llm.provider = provider;
  o.llm.endpoint = endpoint;
  o.llm.model = "test-model";
  o.llm.timeout_s = 1.0;
  o.llm.max_retries = 3;
  o.llm.temperature = 0.2;
  o.llm.max_tokens = 512;
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  o.max_in_flight = 4;
  o.jitter_seed = 7;
  return o;
}

std::unique_ptr<ks::llm_client> make_client(ks::llm_client_options o) {
  auto c = ks::llm_client::create(std::move(o));
  INFO((c ? std::string() : c.message()));
  REQUIRE(c.ok());
  return std::move(c.value());
}

ks::chat_request simple_request(const std::string& text = "Write a ReLU kernel.", const std::string& task = "relu") {
  ks::chat_request r;
  r.system = "You are a CUDA expert.";
  r.messages.push_back({"user", text});
  r.agent = ks::agent_role::generator;
  r.task = task;
  return r;
}

ks::task_spec relu_task() {
  ks::task_spec t;
  t.name = "relu";
  t.description = "ReLU over a 2-D float32 tensor";
  t.torchscript = "def forward(x):\n    return torch.relu(x)\n";
  t.inputs.push_back({"x", {4096, 1024}, "float32", {"normal", 0, 1, 0, 1, 0}});
  t.sizes["cpu"]["x"] = {64, 256};
  return t;
}

ks::candidate relu_candidate() {
  ks::candidate c;
  c.id = "0123456789abcdef";
  c.task = "relu";
  c.source = relu_source;
  c.plan = ks::parse_launch_plan(relu_plan).value();
  c.round = 3;
  return c;
}

void require_no_validation_errors(const llm_fake_server& server) {
  const auto errors = server.validation_errors();
  for (const auto& e : errors) UNSCOPED_INFO("server: " + e);
  REQUIRE(errors.empty());
}

// Sets an environment variable for the scope of a test.
struct env_var {
  std::string name;
  env_var(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
  ~env_var() { ::unsetenv(name.c_str()); }
};

}  // namespace

// ---------------------------------------------------------------------------
// Endpoints.

TEST_CASE("endpoint URLs parse into scheme, host, port and base path", "[llm][endpoint]") {
  auto e = ks::parse_endpoint("http://127.0.0.1:8000/v1/");
  REQUIRE(e.ok());
  CHECK(e->scheme == "http");
  CHECK(e->host == "127.0.0.1");
  CHECK(e->port == 8000);
  CHECK(e->base_path == "/v1");
  CHECK(e->origin() == "http://127.0.0.1:8000");

  auto https = ks::parse_endpoint("HTTPS://api.anthropic.com");
  REQUIRE(https.ok());
  CHECK(https->scheme == "https");
  CHECK(https->port == 443);
  CHECK(https->base_path.empty());

  auto v6 = ks::parse_endpoint("http://[::1]:11434/v1");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->origin() == "http://[::1]:11434");

  CHECK(ks::parse_endpoint("http://localhost")->port == 80);

  CHECK_THAT(ks::parse_endpoint("ftp://x").message(), Contains("http or https"));
  CHECK_THAT(ks::parse_endpoint("localhost:8000").message(), Contains("not a URL"));
  CHECK_THAT(ks::parse_endpoint("http://h:99999").message(), Contains("1-65535"));
  CHECK_THAT(ks::parse_endpoint("http://h:").message(), Contains("port"));
  CHECK_THAT(ks::parse_endpoint("http://user:secret@h/v1").message(), Contains("credentials"));
  CHECK_THAT(ks::parse_endpoint("http://h/v1?key=1").message(), Contains("query"));
  CHECK_THAT(ks::parse_endpoint("http:///v1").message(), Contains("host"));
}

TEST_CASE("each provider's request path follows its SDK's base-URL convention", "[llm][endpoint]") {
  auto path = [](const std::string& provider, const std::string& url) {
    return ks::request_path(provider, ks::parse_endpoint(url).value());
  };
  CHECK(path("openai", "https://api.openai.com/v1") == "/v1/chat/completions");
  CHECK(path("openai", "http://localhost:8000/v1") == "/v1/chat/completions");
  CHECK(path("openai", "http://localhost:8000") == "/chat/completions");
  CHECK(path("openai", "http://h/v1/chat/completions") == "/v1/chat/completions");
  CHECK(path("anthropic", "https://api.anthropic.com") == "/v1/messages");
  CHECK(path("anthropic", "https://api.anthropic.com/v1") == "/v1/messages");
  CHECK(path("anthropic", "http://proxy/llm") == "/llm/v1/messages");
  CHECK(path("anthropic", "http://h/v1/messages") == "/v1/messages");
}

// ---------------------------------------------------------------------------
// Request format and replies, both providers.

TEST_CASE("openai: a correct kernel and plan, and the request the server received", "[llm][http][openai]") {
  llm_fake_server server;
  server.push(openai_ok(good_reply, 321, 123, "test-model-2024"));
  env_var key("KS_LLM_TEST_KEY_OPENAI", "sk-test-123");
  auto o = test_options(server.url("/v1"));
  o.llm.api_key_env = "KS_LLM_TEST_KEY_OPENAI";
  auto client = make_client(o);

  auto req = simple_request();
  req.max_tokens = 256;
  req.temperature = 0.7;
  auto r = client->chat(req);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->text == good_reply);
  CHECK(r->input_tokens == 321);
  CHECK(r->output_tokens == 123);
  CHECK(r->model == "test-model-2024");
  CHECK(r->finish_reason == "stop");
  CHECK_FALSE(r->truncated());
  CHECK(r->attempts == 1);
  CHECK_FALSE(r->cached);
  CHECK(r->latency_ms > 0);

  require_no_validation_errors(server);
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].method == "POST");
  CHECK(reqs[0].path == "/v1/chat/completions");
  CHECK(reqs[0].header("authorization") == "Bearer sk-test-123");
  CHECK(reqs[0].header("x-api-key").empty());
  CHECK_THAT(reqs[0].header("content-type"), StartsWith("application/json"));
  const json body = reqs[0].body_json();
  CHECK(body["model"] == "test-model");
  CHECK(body["max_tokens"] == 256);
  CHECK(body["temperature"].get<double>() == Approx(0.7));
  REQUIRE(body["messages"].size() == 2);
  CHECK(body["messages"][0] == json{{"role", "system"}, {"content", "You are a CUDA expert."}});
  CHECK(body["messages"][1] == json{{"role", "user"}, {"content", "Write a ReLU kernel."}});

  auto parsed = ks::parse_candidate_reply(r->text);
  REQUIRE(parsed.ok());
  CHECK(parsed->source == relu_source);
  REQUIRE(parsed->plan.steps.size() == 1);
  CHECK(parsed->plan.steps[0].name == "relu_f32");
  CHECK(parsed->plan.constants.at("N") == "x.numel");
  CHECK(parsed->plan_yaml == relu_plan);
  CHECK_THAT(parsed->commentary, Contains("coalesced ReLU"));
  CHECK_THAT(parsed->commentary, Contains("And the launch plan:"));
  CHECK(parsed->warnings.empty());
}

TEST_CASE("defaults from the config: temperature and max_tokens, no key, no auth header", "[llm][http][openai]") {
  llm_fake_server server;
  server.push(openai_ok("hi"));
  auto client = make_client(test_options(server.url()));
  auto req = simple_request();
  req.system.clear();
  REQUIRE(client->chat(req).ok());
  require_no_validation_errors(server);
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/chat/completions");
  CHECK(reqs[0].header("authorization").empty());
  const json body = reqs[0].body_json();
  CHECK(body["max_tokens"] == 512);
  CHECK(body["temperature"].get<double>() == Approx(0.2));
  REQUIRE(body["messages"].size() == 1);  // no empty system message
  CHECK(body["messages"][0]["role"] == "user");
}

TEST_CASE("anthropic: messages API request format and reply", "[llm][http][anthropic]") {
  llm_fake_server server;
  server.push(anthropic_ok(good_reply, 400, 200, "claude-test"));
  env_var key("KS_LLM_TEST_KEY_ANTHROPIC", "sk-ant-test");
  auto o = test_options(server.url(), "anthropic");
  o.llm.api_key_env = "KS_LLM_TEST_KEY_ANTHROPIC";
  auto client = make_client(o);

  auto req = simple_request();
  req.messages.push_back({"assistant", "Which dtype?"});
  req.messages.push_back({"user", "float32."});
  auto r = client->chat(req);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->text == good_reply);
  CHECK(r->input_tokens == 400);
  CHECK(r->output_tokens == 200);
  CHECK(r->model == "claude-test");
  CHECK(r->finish_reason == "end_turn");

  require_no_validation_errors(server);
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/v1/messages");
  CHECK(reqs[0].header("x-api-key") == "sk-ant-test");
  CHECK(reqs[0].header("anthropic-version") == "2023-06-01");
  CHECK(reqs[0].header("authorization").empty());
  const json body = reqs[0].body_json();
  CHECK(body["model"] == "test-model");
  CHECK(body["system"] == "You are a CUDA expert.");
  CHECK(body["max_tokens"] == 512);
  REQUIRE(body["messages"].size() == 3);
  for (const auto& m : body["messages"]) CHECK(m["role"] != "system");
  CHECK(body["messages"][2]["content"] == "float32.");

  auto parsed = ks::parse_candidate_reply(r->text);
  REQUIRE(parsed.ok());
  CHECK(parsed->source == relu_source);
}

TEST_CASE("anthropic: a reply cut off at max_tokens says so", "[llm][http][anthropic]") {
  llm_fake_server server;
  const std::string cut = "```cuda\nextern \"C\" __global__ void k(float* y) {\n  y[0] = 1";
  server.push({200, ks::testing::anthropic_body(cut, 10, 512, "claude-test", "max_tokens"), {}, 0});
  server.push(anthropic_ok(good_reply));
  auto client = make_client(test_options(server.url("/v1"), "anthropic"));
  auto r = ks::ask_for_candidate(ks::chat_with(*client), simple_request(), 2);
  REQUIRE(r.ok());
  CHECK(r->format_repairs == 1);
  REQUIRE(r->responses.size() == 2);
  CHECK(r->responses[0].truncated());
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[1].path == "/v1/messages");
  const std::string repair = reqs[1].body_json()["messages"].back()["content"];
  CHECK_THAT(repair, Contains("never closed"));
  CHECK_THAT(repair, Contains("token limit"));
  require_no_validation_errors(server);
}

TEST_CASE("a wrong but well-formed kernel parses: correctness is the reviewer's job", "[llm][http][parser]") {
  llm_fake_server server;
  // Computes y = x (not relu) and launches half the grid: wrong, but well formed.
  const std::string wrong_source =
      "extern \"C\" __global__ void relu_f32(const float* x, float* y, long long n) {\n"
      "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = x[i];\n"
      "}\n";
  std::string wrong_plan = relu_plan;
  wrong_plan.replace(wrong_plan.find("ceil_div(N, BLOCK)"), 18, "ceil_div(N, 2 * BLOCK)");
  server.push(openai_ok(reply_with(wrong_source, wrong_plan)));
  auto client = make_client(test_options(server.url("/v1")));
  auto r = ks::ask_for_candidate(ks::chat_with(*client), simple_request(), 2);
  REQUIRE(r.ok());
  CHECK(r->format_repairs == 0);
  CHECK(r->parsed.source == wrong_source);
  CHECK(r->parsed.plan.steps[0].grid[0] == "ceil_div(N, 2 * BLOCK)");
  CHECK(server.request_count() == 1);
}

TEST_CASE("a kernel that does not compile parses, its source is returned as it is", "[llm][http][parser]") {
  llm_fake_server server;
  const std::string broken =
      "extern \"C\" __global__ void relu_f32(const float* x, float* y, long long n) {\n"
      "  int64_t i = blockIdx.x * blockDim.x + threadIdx.x  // int64_t undefined, ';' missing\n"
      "  if (i < n) y[i] = fmaxf(x[i], 0.0f)\n"
      "}\n";
  server.push(openai_ok(reply_with(broken, relu_plan)));
  auto client = make_client(test_options(server.url("/v1")));
  auto r = ks::ask_for_candidate(ks::chat_with(*client), simple_request(), 2);
  REQUIRE(r.ok());
  CHECK(r->parsed.source == broken);
  CHECK(server.request_count() == 1);
}

TEST_CASE("garbage text: a parse error, then the format-repair round trip succeeds", "[llm][http][parser]") {
  llm_fake_server server;
  const std::string garbage = "I'm sorry, I think the best approach is to use cuBLAS. Let me know!";
  server.push(openai_ok(garbage));
  server.push(openai_ok(good_reply));
  auto client = make_client(test_options(server.url("/v1")));

  auto first = ks::parse_candidate_reply(garbage);
  REQUIRE_FALSE(first.ok());
  CHECK_THAT(first.message(), Contains("no fenced code block"));

  auto req = simple_request();
  auto r = ks::ask_for_candidate(ks::chat_with(*client), req, 2);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->format_repairs == 1);
  CHECK(r->parsed.source == relu_source);
  REQUIRE(r->responses.size() == 2);

  require_no_validation_errors(server);
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 2);
  const json second = reqs[1].body_json();
  // system, the original user message, the garbage as the assistant's turn, the repair.
  REQUIRE(second["messages"].size() == 4);
  CHECK(second["messages"][1]["content"] == req.messages[0].content);
  CHECK(second["messages"][2] == json{{"role", "assistant"}, {"content", garbage}});
  const std::string repair = second["messages"][3]["content"];
  CHECK(second["messages"][3]["role"] == "user");
  CHECK_THAT(repair, Contains("could not be used"));
  CHECK_THAT(repair, Contains("no fenced code block"));
  CHECK_THAT(repair, Contains("```cuda"));
  CHECK_THAT(repair, Contains("```yaml"));
}

TEST_CASE("format repairs are bounded", "[llm][http][parser]") {
  llm_fake_server server;
  server.set_default(openai_ok("Sure! Here it is: y = max(x, 0)."));
  auto client = make_client(test_options(server.url("/v1")));
  auto r = ks::ask_for_candidate(ks::chat_with(*client), simple_request(), 2);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.message(), Contains("after 2 format repairs"));
  CHECK_THAT(r.message(), Contains("no fenced code block"));
  CHECK(server.request_count() == 3);
}

TEST_CASE("a plan YAML error is reported with its position and sent back to the model", "[llm][http][parser]") {
  llm_fake_server server;
  std::string bad_plan = relu_plan;
  bad_plan.replace(bad_plan.find("block:"), 6, "blok:");
  server.push(openai_ok(reply_with(relu_source, bad_plan)));
  server.push(openai_ok(good_reply));
  auto client = make_client(test_options(server.url("/v1")));
  auto r = ks::ask_for_candidate(ks::chat_with(*client), simple_request(), 1);
  REQUIRE(r.ok());
  CHECK(r->format_repairs == 1);
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 2);
  const std::string repair = reqs[1].body_json()["messages"].back()["content"];
  CHECK_THAT(repair, Contains("does not parse"));
  CHECK_THAT(repair, Contains("blok"));
  CHECK_THAT(repair, Contains("did you mean 'block'"));
  CHECK_THAT(repair, Contains("Launch plan format"));
}

TEST_CASE("the diagnoser's JSON reply, with a format repair", "[llm][http][parser]") {
  llm_fake_server server;
  server.push(openai_ok("The bug is the missing semicolon on line 2."));
  server.push(
      openai_ok("Root cause found.\n\n```json\n{\"diagnosis\": \"line 2 lacks a ';' and "
                "int64_t is undefined under NVRTC\", \"actions\": [\"end line 2 with ';'\", "
                "\"write long long instead of int64_t\"]}\n```\n"));
  auto client = make_client(test_options(server.url("/v1")));
  auto req = simple_request("diagnose");
  req.agent = ks::agent_role::diagnoser;
  auto r = ks::ask_for_diagnosis(ks::chat_with(*client), req, 1);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->format_repairs == 1);
  CHECK_THAT(r->plan.diagnosis, Contains("int64_t"));
  REQUIRE(r->plan.actions.size() == 2);
  const std::string repair = server.requests()[1].body_json()["messages"].back()["content"];
  CHECK_THAT(repair, Contains("```json"));
}

// ---------------------------------------------------------------------------
// Retries.

TEST_CASE("HTTP 500 twice, then 200: retried, attempts == 3", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(500, "internal"));
  server.push(error_reply(503, "overloaded"));
  server.push(openai_ok("fine"));
  auto client = make_client(test_options(server.url("/v1")));
  auto r = client->chat(simple_request());
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->text == "fine");
  CHECK(r->attempts == 3);
  CHECK(server.request_count() == 3);
  const auto u = client->usage().task_total("relu");
  CHECK(u.attempts == 3);
  CHECK(u.requests == 1);
  CHECK(u.failures == 0);
}

TEST_CASE("retries are bounded by max_retries, the error names the last failure", "[llm][http][retry]") {
  llm_fake_server server;
  server.set_default(error_reply(502, "upstream down"));
  auto o = test_options(server.url("/v1"));
  o.llm.max_retries = 2;
  auto client = make_client(o);
  auto r = client->chat(simple_request());
  REQUIRE_FALSE(r.ok());
  CHECK(server.request_count() == 3);
  CHECK_THAT(r.message(), Contains("gave up after 3 attempts"));
  CHECK_THAT(r.message(), Contains("HTTP 502"));
  CHECK_THAT(r.message(), Contains("upstream down"));
  CHECK_THAT(r.message(), Contains("max_retries = 2"));
  CHECK(client->usage().task_total("relu").failures == 1);
}

TEST_CASE("429 with Retry-After: the wait is honoured", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(429, "rate limited", {{"Retry-After", "1"}}));
  server.push(openai_ok("after the wait"));
  auto client = make_client(test_options(server.url("/v1")));
  const auto t0 = clock_type::now();
  auto r = client->chat(simple_request());
  const double elapsed = seconds_since(t0);
  REQUIRE(r.ok());
  CHECK(r->attempts == 2);
  CHECK(elapsed >= 0.95);  // the back-off alone would be ~0.01 s
  CHECK(elapsed < 3.0);
}

TEST_CASE("retry-after-ms (OpenAI's header) is honoured too", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(429, "rate limited", {{"retry-after-ms", "300"}}));
  server.push(openai_ok("ok"));
  auto client = make_client(test_options(server.url("/v1")));
  const auto t0 = clock_type::now();
  auto r = client->chat(simple_request());
  REQUIRE(r.ok());
  CHECK(seconds_since(t0) >= 0.28);
}

TEST_CASE("a Retry-After beyond the limit ends the call at once", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(429, "quota exhausted", {{"Retry-After", "3600"}}));
  auto client = make_client(test_options(server.url("/v1")));
  const auto t0 = clock_type::now();
  auto r = client->chat(simple_request());
  REQUIRE_FALSE(r.ok());
  CHECK(seconds_since(t0) < 1.0);
  CHECK(server.request_count() == 1);
  CHECK_THAT(r.message(), Contains("HTTP 429"));
  CHECK_THAT(r.message(), Contains("retry after"));
  CHECK_THAT(r.message(), Contains("quota exhausted"));
}

TEST_CASE("a 400 is not retried, the error says so and quotes the body", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(400, "max_tokens is too large: 999999 > 8192"));
  server.push(openai_ok("must not be reached"));
  auto client = make_client(test_options(server.url("/v1")));
  auto r = client->chat(simple_request());
  REQUIRE_FALSE(r.ok());
  CHECK(server.request_count() == 1);
  CHECK_THAT(r.message(), Contains("HTTP 400"));
  CHECK_THAT(r.message(), Contains("max_tokens is too large: 999999 > 8192"));
  CHECK_THAT(r.message(), Contains("not retried"));
}

TEST_CASE("401 is not retried and does not leak the key", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(401, "invalid x-api-key"));
  env_var key("KS_LLM_TEST_KEY_401", "sk-secret-value-42");
  auto o = test_options(server.url(), "anthropic");
  o.llm.api_key_env = "KS_LLM_TEST_KEY_401";
  auto client = make_client(o);
  auto r = client->chat(simple_request());
  REQUIRE_FALSE(r.ok());
  CHECK(server.request_count() == 1);
  CHECK_THAT(r.message(), Contains("HTTP 401"));
  CHECK_THAT(r.message(), Contains("api_key_env"));
  CHECK(r.message().find("sk-secret-value-42") == std::string::npos);
  CHECK(client->describe().find("sk-secret") == std::string::npos);
}

TEST_CASE("408 and Anthropic's 529 are retried", "[llm][http][retry]") {
  llm_fake_server server;
  server.push(error_reply(408, "request timeout"));
  server.push(error_reply(529, "overloaded_error"));
  server.push(anthropic_ok("ok"));
  auto client = make_client(test_options(server.url(), "anthropic"));
  auto r = client->chat(simple_request());
  REQUIRE(r.ok());
  CHECK(r->attempts == 3);
}

TEST_CASE("a server that sleeps past the timeout: timeout error after the retries, in bounded time",
          "[llm][http][retry][timeout]") {
  llm_fake_server server;
  server.set_default(scripted_reply{200, ks::testing::openai_body("too late"), {}, 5.0});
  auto o = test_options(server.url("/v1"));
  o.llm.timeout_s = 0.3;
  o.llm.max_retries = 2;
  auto client = make_client(o);
  const auto t0 = clock_type::now();
  auto r = client->chat(simple_request());
  const double elapsed = seconds_since(t0);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.message(), Contains("timeout"));
  CHECK_THAT(r.message(), Contains("gave up after 3 attempts"));
  CHECK(server.request_count() == 3);
  CHECK(elapsed >= 0.85);  // three attempts of 0.3 s
  CHECK(elapsed < 2.5);
}

TEST_CASE("connection refused is retried, then reported", "[llm][http][retry]") {
  int port = 0;
  {
    llm_fake_server gone;  // bind a port, then free it
    port = gone.port();
  }
  auto o = test_options("http://127.0.0.1:" + std::to_string(port) + "/v1");
  o.llm.max_retries = 1;
  auto client = make_client(o);
  auto r = client->chat(simple_request());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.message(), Contains("cannot connect"));
  CHECK_THAT(r.message(), Contains("is the server running?"));
  CHECK_THAT(r.message(), Contains("gave up after 2 attempts"));
}

TEST_CASE("Retry-After values: seconds, decimals, HTTP dates", "[llm][retry]") {
  using namespace std::chrono;
  CHECK(ks::parse_retry_after("7").value() == 7);
  CHECK(ks::parse_retry_after(" 1.5 ").value() == 1.5);
  CHECK_FALSE(ks::parse_retry_after("soon").has_value());
  CHECK_FALSE(ks::parse_retry_after("").has_value());
  const auto now = system_clock::from_time_t(1445412480);  // Wed, 21 Oct 2015 07:28:00 GMT
  CHECK(ks::parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now).value() == 30);
  CHECK(ks::parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now).value() == 0);
}

// ---------------------------------------------------------------------------
// Concurrency.

TEST_CASE("the in-flight limit holds across parallel requests", "[llm][http][concurrency]") {
  llm_fake_server server;
  server.set_default(scripted_reply{200, ks::testing::openai_body("ok"), {}, 0.15});
  auto o = test_options(server.url("/v1"));
  o.max_in_flight = 2;
  auto client = make_client(o);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      if (client->chat(simple_request("request " + std::to_string(i))).ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 8);
  CHECK(server.request_count() == 8);
  CHECK(server.max_in_flight() <= 2);
  CHECK(server.max_in_flight() == 2);  // and the limit is used, not serialised
  CHECK(client->limiter().peak() == 2);
  CHECK(client->limiter().in_flight() == 0);
}

TEST_CASE("one limiter shared by two clients bounds them together", "[llm][http][concurrency]") {
  llm_fake_server server;
  server.set_default(scripted_reply{200, ks::testing::openai_body("ok"), {}, 0.1});
  auto shared = std::make_shared<ks::request_limiter>(3);
  auto o = test_options(server.url("/v1"));
  o.limiter = shared;
  auto a = make_client(o);
  auto b = make_client(o);
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i)
    threads.emplace_back([&, i] {
      auto& c = i % 2 ? *a : *b;
      (void)c.chat(simple_request("request " + std::to_string(i)));
    });
  for (auto& t : threads) t.join();
  CHECK(server.request_count() == 10);
  CHECK(server.max_in_flight() <= 3);
  CHECK(shared->peak() <= 3);
}

// ---------------------------------------------------------------------------
// Accounting.

TEST_CASE("tokens and cost per task and agent, from the usage fields", "[llm][http][usage]") {
  llm_fake_server server;
  server.push(openai_ok("a", 1000, 200));
  server.push(openai_ok("b", 500, 100));
  server.push(openai_ok("c", 7, 3));
  server.push(error_reply(400, "bad"));
  auto o = test_options(server.url("/v1"));
  o.prices["test-model"] = {2.0, 10.0};  // USD per million tokens
  auto client = make_client(o);

  auto gen = simple_request("one", "task-a");
  auto r1 = client->chat(gen);
  REQUIRE(r1.ok());
  CHECK(r1->cost_usd == Approx((1000 * 2.0 + 200 * 10.0) / 1e6));
  auto opt = simple_request("two", "task-a");
  opt.agent = ks::agent_role::optimizer;
  REQUIRE(client->chat(opt).ok());
  REQUIRE(client->chat(simple_request("three", "task-b")).ok());
  REQUIRE_FALSE(client->chat(simple_request("four", "task-b")).ok());

  const auto a = client->usage().task_total("task-a");
  CHECK(a.requests == 2);
  CHECK(a.input_tokens == 1500);
  CHECK(a.output_tokens == 300);
  CHECK(a.cost_usd == Approx((1500 * 2.0 + 300 * 10.0) / 1e6));
  CHECK(a.notes.empty());
  const auto by_agent = client->usage().by_agent("task-a");
  REQUIRE(by_agent.count("generator"));
  REQUIRE(by_agent.count("optimizer"));
  CHECK(by_agent.at("generator").input_tokens == 1000);
  CHECK(by_agent.at("optimizer").output_tokens == 100);

  const auto b = client->usage().task_total("task-b");
  CHECK(b.requests == 1);
  CHECK(b.failures == 1);
  CHECK(b.input_tokens == 7);
  const auto all = client->usage().total();
  CHECK(all.input_tokens == 1507);
  CHECK(all.attempts == 4);
  CHECK(client->usage().tasks() == std::vector<std::string>{"task-a", "task-b"});
}

TEST_CASE("an unpriced model: tokens counted, cost 0, with a note", "[llm][http][usage]") {
  llm_fake_server server;
  server.push(openai_ok("a", 100, 50, "my-local-llama"));
  auto o = test_options(server.url("/v1"));
  o.llm.model = "my-local-llama";
  auto client = make_client(o);
  auto r = client->chat(simple_request());
  REQUIRE(r.ok());
  CHECK(r->cost_usd == 0);
  const auto u = client->usage().task_total("relu");
  CHECK(u.input_tokens == 100);
  CHECK(u.output_tokens == 50);
  CHECK(u.cost_usd == 0);
  REQUIRE(u.notes.size() == 1);
  CHECK_THAT(*u.notes.begin(), Contains("no price for model 'my-local-llama'"));
}

TEST_CASE("price lookup: exact, dated and routed names, longest prefix", "[llm][usage]") {
  const auto& t = ks::default_prices();
  REQUIRE(ks::find_price(t, "gpt-4o") != nullptr);
  CHECK(ks::find_price(t, "gpt-4o-2024-08-06") == &t.at("gpt-4o"));
  CHECK(ks::find_price(t, "gpt-4o-mini-2024-07-18") == &t.at("gpt-4o-mini"));
  CHECK(ks::find_price(t, "claude-sonnet-4-20250514") == &t.at("claude-sonnet-4"));
  CHECK(ks::find_price(t, "openai/gpt-4.1") == &t.at("gpt-4.1"));
  CHECK(ks::find_price(t, "gpt-4") == nullptr);
  CHECK(ks::find_price(t, "qwen2.5-coder") == nullptr);
  CHECK(ks::cost_usd({3.0, 15.0}, 1'000'000, 100'000) == Approx(4.5));
}

// ---------------------------------------------------------------------------
// Cache.

TEST_CASE("the response cache: a hit for the same request, across client instances", "[llm][http][cache]") {
  llm_fake_server server;
  server.set_default(openai_ok(good_reply, 100, 40));
  temp_dir dir;
  auto o = test_options(server.url("/v1"));
  o.llm.cache_dir = (dir.path / "cache").string();
  o.prices["test-model"] = {1.0, 1.0};

  auto req = simple_request();
  {
    auto client = make_client(o);
    auto first = client->chat(req);
    REQUIRE(first.ok());
    CHECK_FALSE(first->cached);
    CHECK(server.request_count() == 1);
    auto second = client->chat(req);
    REQUIRE(second.ok());
    CHECK(second->cached);
    CHECK(second->attempts == 0);
    CHECK(second->text == first->text);
    CHECK(second->input_tokens == 100);
    CHECK(second->cost_usd == 0);
    CHECK(server.request_count() == 1);
    const auto u = client->usage().task_total("relu");
    CHECK(u.requests == 2);
    CHECK(u.cache_hits == 1);
    CHECK(u.input_tokens == 100);  // billed once
  }
  {
    auto again = make_client(o);  // a new instance (a restarted daemon)
    auto third = again->chat(req);
    REQUIRE(third.ok());
    CHECK(third->cached);
    CHECK(server.request_count() == 1);

    auto warmer = req;
    warmer.temperature = 0.9;  // a different request
    REQUIRE_FALSE(again->chat(warmer)->cached);
    CHECK(server.request_count() == 2);

    auto bypass = req;
    bypass.use_cache = false;
    REQUIRE_FALSE(again->chat(bypass)->cached);
    CHECK(server.request_count() == 3);

    auto other_task = req;  // labels are not part of the key
    other_task.task = "another";
    other_task.agent = ks::agent_role::optimizer;
    CHECK(again->chat(other_task)->cached);
    CHECK(server.request_count() == 3);
  }
  // One file per reply, no temporary files left behind.
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path / "cache")) {
    if (!e.is_regular_file()) continue;
    ++files;
    CHECK(e.path().extension() == ".json");
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  }
  CHECK(files == 2);
}

TEST_CASE("failed replies are not cached, a corrupt cache file is a miss", "[llm][http][cache]") {
  llm_fake_server server;
  server.push(error_reply(500, "boom"));
  server.push(openai_ok("good"));
  temp_dir dir;
  auto o = test_options(server.url("/v1"));
  o.llm.cache_dir = dir.path.string();
  o.llm.max_retries = 0;
  auto client = make_client(o);
  auto req = simple_request();
  REQUIRE_FALSE(client->chat(req).ok());
  auto r = client->chat(req);
  REQUIRE(r.ok());
  CHECK_FALSE(r->cached);
  CHECK(r->text == "good");
  CHECK(server.request_count() == 2);

  // Corrupt the stored file: the next call is a miss and rewrites it.
  ks::response_cache cache(dir.path);
  const ks::cache_key_fields fields{"openai", "test-model", 0.2, 512, req.system, req.messages};
  const fs::path file = cache.path_for(ks::cache_key(fields));
  REQUIRE(fs::exists(file));
  std::ofstream(file) << "{ not json";
  server.push(openai_ok("fresh"));
  auto again = client->chat(req);
  REQUIRE(again.ok());
  CHECK_FALSE(again->cached);
  CHECK(again->text == "fresh");
  CHECK(client->chat(req)->cached);
}

TEST_CASE("cache keys depend on every field that decides a reply", "[llm][cache]") {
  const ks::cache_key_fields base{"openai", "m", 0.2, 100, "sys", {{"user", "hi"}}};
  const std::string k = ks::cache_key(base);
  CHECK(k.size() == 64);
  CHECK(ks::cache_key(base) == k);
  auto vary = [&](auto change) {
    auto f = base;
    change(f);
    return ks::cache_key(f);
  };
  CHECK(vary([](auto& f) { f.provider = "anthropic"; }) != k);
  CHECK(vary([](auto& f) { f.model = "m2"; }) != k);
  CHECK(vary([](auto& f) { f.temperature = 0.3; }) != k);
  CHECK(vary([](auto& f) { f.max_tokens = 101; }) != k);
  CHECK(vary([](auto& f) { f.system = "sys2"; }) != k);
  CHECK(vary([](auto& f) { f.messages[0].content = "hi!"; }) != k);
  CHECK(vary([](auto& f) { f.messages[0].role = "assistant"; }) != k);
}

// ---------------------------------------------------------------------------
// Configuration errors.

TEST_CASE("a missing API key variable is an error that names it", "[llm][config]") {
  ::unsetenv("KS_LLM_TEST_MISSING_KEY");
  auto o = test_options("http://127.0.0.1:9/v1");
  o.llm.api_key_env = "KS_LLM_TEST_MISSING_KEY";
  auto c = ks::llm_client::create(o);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.message(), Contains("KS_LLM_TEST_MISSING_KEY"));
  CHECK_THAT(c.message(), Contains("not set"));

  env_var empty("KS_LLM_TEST_MISSING_KEY", "");
  auto e = ks::llm_client::create(o);
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.message(), Contains("empty"));
}

TEST_CASE("other configuration errors", "[llm][config]") {
  auto o = test_options("http://127.0.0.1:9/v1");
  o.llm.provider = "gemini";
  CHECK_THAT(ks::llm_client::create(o).message(), Contains("unknown provider 'gemini'"));
  o = test_options("127.0.0.1:9");
  CHECK_THAT(ks::llm_client::create(o).message(), Contains("coder.llm.endpoint"));
  o = test_options("http://127.0.0.1:9");
  o.llm.model.clear();
  CHECK_THAT(ks::llm_client::create(o).message(), Contains("coder.llm.model"));
  o = test_options("http://127.0.0.1:9");
  o.max_in_flight = 0;
  CHECK_THAT(ks::llm_client::create(o).message(), Contains("llm_requests_in_flight"));

  ks::experiment_config cfg;
  cfg.coder.llm.model = "x";
  cfg.budgets.llm_requests_in_flight = 7;
  CHECK(ks::client_options(cfg).max_in_flight == 7);
  CHECK(ks::client_options(cfg).llm.model == "x");
}

TEST_CASE("malformed chat requests are refused before anything is sent", "[llm][http]") {
  llm_fake_server server;
  auto client = make_client(test_options(server.url("/v1")));
  ks::chat_request empty;
  CHECK_THAT(client->chat(empty).message(), Contains("no messages"));
  auto bad = simple_request();
  bad.messages.push_back({"system", "sneaky"});
  CHECK_THAT(client->chat(bad).message(), Contains("messages[1].role is 'system'"));
  auto zero = simple_request();
  zero.max_tokens = 0;
  CHECK_THAT(client->chat(zero).message(), Contains("max_tokens"));
  CHECK(server.request_count() == 0);

  llm_fake_server anthropic;
  auto claude = make_client(test_options(anthropic.url(), "anthropic"));
  auto hot = simple_request();
  hot.temperature = 1.5;
  CHECK_THAT(claude->chat(hot).message(), Contains("above Anthropic's maximum of 1"));
  CHECK(anthropic.request_count() == 0);
}

// ---------------------------------------------------------------------------
// Wire formats without a network.

TEST_CASE("reply decoding: both providers, errors inside 2xx, content parts", "[llm][format]") {
  auto o = ks::decode_chat_body("openai", ks::testing::openai_body("x", 1, 2, "m", "length"));
  REQUIRE(o.ok());
  CHECK(o->finish_reason == "length");
  auto parts = ks::decode_chat_body(
      "openai", R"({"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]})");
  REQUIRE(parts.ok());
  CHECK(parts->text == "ab");
  CHECK(parts->input_tokens == 0);
  auto thinking = ks::decode_chat_body(
      "anthropic",
      R"({"content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"answer"}],"usage":{"input_tokens":3,"output_tokens":4}})");
  REQUIRE(thinking.ok());
  CHECK(thinking->text == "answer");
  CHECK_THAT(ks::decode_chat_body("openai", R"({"error":{"message":"model not loaded"}})").message(),
             Contains("model not loaded"));
  CHECK_THAT(ks::decode_chat_body("openai", "<html>").message(), Contains("not JSON"));
  CHECK_THAT(ks::decode_chat_body("anthropic", R"({"id":1})").message(), Contains("content"));
  CHECK(ks::api_error_text(R"({"detail":"Not Found"})") == "Not Found");
  CHECK(ks::api_error_text("plain text") == "plain text");
}

// ---------------------------------------------------------------------------
// The reply parser without a network.

TEST_CASE("fenced blocks: tags, tildes, indentation, CRLF, unclosed", "[llm][parser]") {
  const std::string text =
      "Intro\r\n```CUDA\r\nint a;\r\n```\r\n  ~~~yml\n  k: v\n  ~~~\n````\n```inner```\n````\n```cpp\nx";
  const auto blocks = ks::extract_fenced_blocks(text);
  REQUIRE(blocks.size() == 4);
  CHECK(blocks[0].info == "cuda");
  CHECK(blocks[0].body == "int a;\n");
  CHECK(blocks[0].line == 2);
  CHECK(blocks[1].info == "yml");
  CHECK(blocks[1].body == "  k: v\n");
  CHECK(blocks[2].info.empty());
  CHECK(blocks[2].body == "```inner```\n");
  CHECK(blocks[3].info == "cpp");
  CHECK_FALSE(blocks[3].closed);
}

TEST_CASE("candidate replies: which blocks are used, and what is reported", "[llm][parser]") {
  SECTION("cpp and yml tags are accepted") {
    auto r = ks::parse_candidate_reply("```c++\n" + relu_source + "```\n```yml\n" + relu_plan + "```\n");
    REQUIRE(r.ok());
    CHECK(r->source == relu_source);
  }
  SECTION("untagged blocks are recognised by their content") {
    auto r = ks::parse_candidate_reply("```\n" + relu_source + "```\n```\n" + relu_plan + "```\n");
    REQUIRE(r.ok());
    CHECK(r->plan.steps.size() == 1);
  }
  SECTION("several code blocks: the last kernel is used, with a warning") {
    const std::string old_snippet = "// the old loop:\nfor (int i = 0; i < n; ++i) {}\n";
    auto r = ks::parse_candidate_reply("Before:\n```cuda\n" + old_snippet + "```\n" + good_reply);
    REQUIRE(r.ok());
    CHECK(r->source == relu_source);
    REQUIRE(r->warnings.size() == 1);
    CHECK_THAT(r->warnings[0], Contains("2 code blocks"));
  }
  SECTION("no plan") {
    auto r = ks::parse_candidate_reply("```cuda\n" + relu_source + "```\n");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("no ```yaml block"));
  }
  SECTION("no code") {
    auto r = ks::parse_candidate_reply("```yaml\n" + relu_plan + "```\n");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("no ```cuda block"));
  }
  SECTION("an empty code block") {
    auto r = ks::parse_candidate_reply("```cuda\n```\n```yaml\n" + relu_plan + "```\n");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("is empty"));
  }
  SECTION("a plan YAML error carries its position") {
    auto r = ks::parse_candidate_reply(
        "```cuda\n" + relu_source +
        "```\n```yaml\nsteps:\n  - kernel: k\n    grid: [cdiv(N, 2)]\n    block: [256]\n    args: []\n```\n");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("does not parse"));
    CHECK_THAT(r.message(), Contains("plan:3:"));
    CHECK_THAT(r.message(), Contains("cdiv"));
  }
  SECTION("cut off inside the source: both problems at once") {
    auto r = ks::parse_candidate_reply("```cuda\nextern \"C\" __global__ void k(");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("never closed"));
    CHECK_THAT(r.message(), Contains("no ```yaml block"));
    const std::string prompt = ks::repair_prompt("```cuda\nextern", r.message());
    CHECK_THAT(prompt, Contains("token limit"));
    CHECK_THAT(prompt, Contains("(not closed)"));
  }
}

TEST_CASE("diagnosis replies", "[llm][parser]") {
  auto bare =
      ks::parse_diagnosis_reply("Thinking... {\"diagnosis\": \"off by one\", \"actions\": \"use < instead of <=\"}");
  REQUIRE(bare.ok());
  CHECK(bare->diagnosis == "off by one");
  CHECK(bare->actions == std::vector<std::string>{"use < instead of <="});
  CHECK_THAT(ks::parse_diagnosis_reply("no idea").message(), Contains("no ```json block"));
  CHECK_THAT(ks::parse_diagnosis_reply("```json\n{\"diagnosis\": \"x\"}\n```").message(), Contains("actions"));
  CHECK_THAT(ks::parse_diagnosis_reply("```json\n{\"diagnosis\": \"x\", \"actions\": []}\n```").message(),
             Contains("empty"));
  CHECK_THAT(ks::parse_diagnosis_reply("```json\n{oops}\n```").message(), Contains("not valid JSON"));
}

// ---------------------------------------------------------------------------
// Prompts.

TEST_CASE("generator prompt: the task, the plan format, an example, the reply format", "[llm][prompts]") {
  const auto task = relu_task();
  auto req = ks::generator_prompt(task, {1, 4, ""});
  CHECK(req.agent == ks::agent_role::generator);
  CHECK(req.task == "relu");
  CHECK_FALSE(req.max_tokens.has_value());
  REQUIRE(req.messages.size() == 1);
  const std::string& u = req.messages[0].content;
  CHECK_THAT(req.system, Contains("NVRTC"));
  CHECK_THAT(req.system, Contains("extern \"C\" __global__"));
  CHECK_THAT(req.system, Contains("```cuda"));
  CHECK_THAT(req.system, Contains("```yaml"));
  CHECK_THAT(u, Contains("return torch.relu(x)"));
  CHECK_THAT(u, Contains("`x`: float32 [4096, 1024], normal(mean 0, std 1)"));
  CHECK_THAT(u, Contains("cpu (x [64, 256])"));
  CHECK_THAT(u, Contains("0.0001 + 0.0001 * |ref|"));
  CHECK_THAT(u, Contains("Launch plan format"));
  CHECK_THAT(u, Contains("{int64: E}"));
  CHECK_THAT(u, Contains("Seed 2 of 4"));
  CHECK_THAT(u, Contains("vectorised"));
  // The plan example in the guide is a valid plan.
  const auto blocks = ks::extract_fenced_blocks(ks::launch_plan_guide());
  int yaml_blocks = 0;
  for (const auto& b : blocks)
    if (b.info == "yaml") {
      ++yaml_blocks;
      auto p = ks::parse_launch_plan(b.body);
      INFO(b.body);
      CHECK((p ? std::string() : p.message()) == "");
    }
  CHECK(yaml_blocks == 2);
  // Seeds differ, so their cache keys do.
  CHECK(ks::generator_prompt(task, {0, 4, ""}).messages[0].content != u);
  CHECK_THAT(ks::generator_prompt(task, {0, 4, "use one warp per row"}).messages[0].content,
             Contains("use one warp per row"));
}

TEST_CASE("optimizer prompt: kernel, plan decision, method knowledge, profile, features, history", "[llm][prompts]") {
  auto lib = ks::load_skill_library(fs::path(KS_SOURCE_DIR) / "skills");
  INFO((lib ? std::string() : lib.message()));
  REQUIRE(lib.ok());
  const ks::method_def* method = lib->find_method("vectorize_loads");
  REQUIRE(method != nullptr);

  const auto task = relu_task();
  const auto cand = relu_candidate();
  ks::review_result review;
  review.status = ks::review_status::ok;
  review.speedup = 1.07;
  review.candidate_time.median_ms = 0.61;
  review.reference_time.median_ms = 0.653;
  review.profile.values = {{"dram_throughput_pct", 71.5}, {"achieved_occupancy_pct", 88}};
  review.profile.kernel_launches = 1;
  review.resources.push_back({"relu_f32", 16, 0, 0, 1024});
  ks::code_features features;
  features.structure_class = "streaming";
  features.values = {{"uses_vector_loads", 0}, {"is_pointwise", 1}};
  ks::optimization_plan plan;
  plan.bottleneck_class = "memory_bandwidth";
  plan.chosen = "vectorize_loads";
  plan.rationale = "DRAM 71.5% with scalar loads";
  plan.ranked.push_back({"vectorize_loads", 1.4, {"mem_stream_no_vector"}, {{"dram_throughput_pct", 71.5}}});
  plan.ranked.push_back({"grid_stride_loop", 1.05, {}, {}});
  plan.vetoed.push_back({"shared_memory_tiling", "no reuse: tiles only add traffic"});
  std::vector<ks::trajectory_entry> history(2);
  history[0].kind = "seed";
  history[0].candidate_id = "0123456789abcdef";
  history[0].speedup = 1.07;
  history[0].summary = "seed 1: one element per thread";
  history[1].round = 2;
  history[1].kind = "optimize";
  history[1].method = "increase_block_size";
  history[1].status = ks::review_status::incorrect;
  history[1].summary = "block 1024 broke the tail";

  auto req = ks::optimizer_prompt(task, cand, review, features, plan, method, history);
  CHECK(req.agent == ks::agent_role::optimizer);
  const std::string& u = req.messages[0].content;
  CHECK_THAT(u, Contains(relu_source));
  CHECK_THAT(u, Contains("kernel: relu_f32"));
  CHECK_THAT(u, Contains("round 3"));
  CHECK_THAT(u, Contains("1.07x"));
  CHECK_THAT(u, Contains("dram_throughput_pct = 71.5"));
  CHECK_THAT(u, Contains("relu_f32: 16 registers/thread"));
  CHECK_THAT(u, Contains("Structure: streaming"));
  CHECK_THAT(u, Contains("uses_vector_loads = 0"));
  CHECK_THAT(u, Contains("Bottleneck class: memory_bandwidth"));
  CHECK_THAT(u, Contains("mem_stream_no_vector"));
  CHECK_THAT(u, Contains("`shared_memory_tiling`: no reuse"));
  CHECK_THAT(u, Contains("grid_stride_loop"));
  // The method's knowledge from the skill library.
  CHECK_THAT(u, Contains(method->name));
  CHECK_THAT(u, Contains(method->rationale.substr(0, 60)));
  CHECK_THAT(u, Contains(method->preconditions.at(0)));
  CHECK_THAT(u, Contains(method->forbidden_patterns.at(0)));
  CHECK_THAT(u, Contains("dram_throughput_pct up"));
  CHECK_THAT(u, Contains(method->example.substr(0, 40)));
  // The trajectory, with the failed method called out.
  CHECK_THAT(u, Contains("block 1024 broke the tail"));
  CHECK_THAT(u, Contains("`increase_block_size`: incorrect (round 2)"));
  CHECK_THAT(req.system, Contains("optimizer"));

  // Without method knowledge the method is still named.
  auto bare = ks::optimizer_prompt(task, cand, review, features, plan, nullptr, {});
  CHECK_THAT(bare.messages[0].content, Contains("`vectorize_loads`"));
  CHECK_THAT(bare.messages[0].content, Contains("Nothing yet"));
}

TEST_CASE("repairer and diagnoser prompts: diagnostics with their lines, mismatches, history", "[llm][prompts]") {
  const auto task = relu_task();
  auto cand = relu_candidate();
  cand.source =
      "extern \"C\" __global__ void relu_f32(const float* x, float* y, long long n) {\n"
      "  int64_t i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = fmaxf(x[i], 0.0f);\n"
      "}\n";
  ks::review_result compile;
  compile.status = ks::review_status::compile_error;
  compile.message = "NVRTC: 1 error";
  compile.diagnostics.push_back({2, 3, "error", "identifier \"int64_t\" is undefined"});

  ks::repair_plan diagnosis;
  diagnosis.diagnosis = "int64_t is not defined under NVRTC";
  diagnosis.actions = {"replace int64_t with long long on line 2"};
  std::vector<ks::trajectory_entry> failed(1);
  failed[0].round = 3;
  failed[0].kind = "repair";
  failed[0].method = "include <cstdint>";
  failed[0].status = ks::review_status::compile_error;
  failed[0].summary = "host header not found";

  auto rep = ks::repairer_prompt(task, cand, compile, diagnosis, failed);
  CHECK(rep.agent == ks::agent_role::repairer);
  const std::string& u = rep.messages[0].content;
  CHECK_THAT(u, Contains("line 2, column 3: error: identifier \"int64_t\" is undefined"));
  CHECK_THAT(u, Contains("2 |   int64_t i = blockIdx.x"));
  CHECK_THAT(u, Contains("int64_t is not defined under NVRTC"));
  CHECK_THAT(u, Contains("1. replace int64_t with long long on line 2"));
  CHECK_THAT(u, Contains("do not repeat them"));
  CHECK_THAT(u, Contains("`include <cstdint>`"));
  CHECK_THAT(u, Contains("host header not found"));
  CHECK_THAT(u, Contains("<cuda/std/cstdint>"));  // the compile-error checklist

  ks::review_result mismatch;
  mismatch.status = ks::review_status::incorrect;
  mismatch.trials_run = 5;
  mismatch.trials_passed = 2;
  mismatch.max_abs_error = 0.5;
  mismatch.max_rel_error = 1.0;
  auto diag = ks::diagnoser_prompt(task, cand, mismatch, failed);
  CHECK(diag.agent == ks::agent_role::diagnoser);
  const std::string& d = diag.messages[0].content;
  CHECK_THAT(d, Contains("2 of 5 trials passed"));
  CHECK_THAT(d, Contains("max abs error 0.5"));
  CHECK_THAT(d, Contains("__syncthreads"));
  CHECK_THAT(d, Contains("host header not found"));
  CHECK_THAT(diag.system, Contains("```json"));
  CHECK_THAT(diag.system, Contains("\"diagnosis\""));
}

TEST_CASE("prompt sizes stay bounded", "[llm][prompts]") {
  const auto task = relu_task();
  const auto cand = relu_candidate();
  ks::review_result r;
  r.status = ks::review_status::compile_error;
  r.compile_log = std::string(100000, 'x');
  for (int i = 0; i < 100; ++i) r.diagnostics.push_back({i + 1, 1, "error", "e" + std::to_string(i)});
  std::vector<ks::trajectory_entry> history(500);
  for (auto& e : history) e.summary = std::string(5000, 's');
  auto req = ks::diagnoser_prompt(task, cand, r, history);
  CHECK(req.messages[0].content.size() < 40000);
  CHECK_THAT(req.messages[0].content, Contains("80 more"));
  CHECK_THAT(req.messages[0].content, Contains("the last 24 of 500 events"));
}

// Not run by default: prints the prompts for a person to read (llm_test "[print]").
TEST_CASE("print example prompts", "[.][print]") {
  auto lib = ks::load_skill_library(fs::path(KS_SOURCE_DIR) / "skills");
  REQUIRE(lib.ok());
  const auto task = relu_task();
  const auto cand = relu_candidate();
  auto gen = ks::generator_prompt(task, {0, 4, ""});
  std::cout << "=== generator: system ===\n"
            << gen.system << "\n=== generator: user ===\n"
            << gen.messages[0].content << "\n";
  ks::review_result review;
  review.status = ks::review_status::ok;
  review.speedup = 1.07;
  review.candidate_time.median_ms = 0.61;
  review.reference_time.median_ms = 0.653;
  review.profile.values = {{"dram_throughput_pct", 71.5}, {"achieved_occupancy_pct", 88}};
  review.profile.kernel_launches = 1;
  review.resources.push_back({"relu_f32", 16, 0, 0, 1024});
  ks::code_features features;
  features.structure_class = "streaming";
  features.values = {{"uses_vector_loads", 0}, {"is_pointwise", 1}};
  ks::optimization_plan plan;
  plan.bottleneck_class = "memory_bandwidth";
  plan.chosen = "vectorize_loads";
  plan.rationale = "DRAM 71.5% with scalar loads";
  plan.ranked.push_back({"vectorize_loads", 1.4, {"mem_stream_no_vector"}, {{"dram_throughput_pct", 71.5}}});
  plan.vetoed.push_back({"shared_memory_tiling", "no reuse: tiles only add traffic"});
  auto opt = ks::optimizer_prompt(task, cand, review, features, plan, lib->find_method("vectorize_loads"), {});
  std::cout << "=== optimizer: user ===\n" << opt.messages[0].content << "\n";
  ks::review_result compile;
  compile.status = ks::review_status::compile_error;
  compile.diagnostics.push_back({2, 3, "error", "identifier \"int64_t\" is undefined"});
  auto diag = ks::diagnoser_prompt(task, cand, compile, {});
  std::cout << "=== diagnoser: system ===\n"
            << diag.system << "\n=== diagnoser: user ===\n"
            << diag.messages[0].content << "\n";
}
