// The configuration module: defaults, a full config, task path resolution, the
// to_yaml round trip, the shipped example, and — most of all — that every kind of
// bad input is refused with a message naming the place, the key and the problem.

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "config/experiment_config.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A fresh directory under the system temp dir, removed with everything in it.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static std::atomic<int> counter{0};
    path =
        fs::temp_directory_path() / ("ks-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& rel, const std::string& text = "name: t\n") const {
    const fs::path p = path / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

ks::result<ks::experiment_config> parse(const std::string& text, const fs::path& base = {}) {
  return ks::parse_config(text, "exp.yaml", base.empty() ? fs::temp_directory_path() : base);
}

// Parses text that must be refused; returns the message for further checks.
std::string rejected(const std::string& text, const fs::path& base = {}) {
  auto r = parse(text, base);
  REQUIRE_FALSE(r.ok());
  INFO(r.message());
  CHECK_THAT(r.message(), StartsWith("exp.yaml:"));
  return r.message();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The default config, as parse_config gives it for an empty text named `source`.
ks::experiment_config defaults_from(const std::string& source) {
  ks::experiment_config c;
  c.source = source;
  return c;
}

// Every key path of a YAML map tree ("budgets.rounds", "coder.llm.model", ...).
void key_paths(const YAML::Node& n, const std::string& prefix, std::set<std::string>& out) {
  if (!n.IsMap()) return;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string p = prefix.empty() ? it->first.Scalar() : prefix + "." + it->first.Scalar();
    out.insert(p);
    key_paths(it->second, p, out);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Valid configs

TEST_CASE("an empty config gives every documented default", "[config]") {
  for (const std::string text : {"", "# only a comment\n", "budgets:\ngpus:\ncoder:\n  llm:\n"}) {
    auto r = parse(text);
    INFO("text: " << text);
    REQUIRE(r.ok());
    const ks::experiment_config& c = *r;
    CHECK(c == defaults_from("exp.yaml"));
    CHECK(c.name == "kernelskill");
    CHECK(c.source == "exp.yaml");
    CHECK(c.tasks.empty());
    CHECK(c.gpus.local_all);
    CHECK(c.gpus.local_devices.empty());
    CHECK(c.gpus.remote.empty());
    CHECK(c.gpus.worker_binary.empty());
    CHECK(c.gpus.review_timeout_s == 60);
    CHECK(c.gpus.trial_cache_gib == 0);
    CHECK(c.budgets.seeds == 4);
    CHECK(c.budgets.rounds == 15);
    CHECK(c.budgets.repair_attempts == 3);
    CHECK(c.budgets.tasks_in_flight == 2);
    CHECK(c.budgets.llm_requests_in_flight == 4);
    CHECK(c.budgets.device_queue_depth == 8);
    CHECK(c.coder.backend == "rules");
    CHECK(c.coder.llm.provider == "openai");
    CHECK(c.coder.llm.endpoint.empty());
    CHECK(c.coder.llm.model.empty());
    CHECK(c.coder.llm.api_key_env.empty());
    CHECK(c.coder.llm.timeout_s == 120);
    CHECK(c.coder.llm.max_retries == 3);
    CHECK(c.coder.llm.temperature == 0.2);
    CHECK(c.coder.llm.max_tokens == 8192);
    CHECK(c.coder.llm.stream);
    CHECK(c.coder.llm.reply_timeout_s == 0);
    CHECK_FALSE(c.coder.llm.reasoning);
    CHECK(c.coder.llm.reasoning_effort.empty());
    CHECK(c.coder.llm.context_tokens == 0);
    CHECK(c.coder.llm.prompt_tokens == 0);
    CHECK(c.coder.llm.cache_dir.empty());
    CHECK(c.review.trials == 5);
    CHECK(c.review.suspicious_speedup == 20);
    CHECK(c.review.size.empty());
    CHECK(c.ablation.long_term_memory);
    CHECK(c.ablation.short_term_memory);
    CHECK(c.memory.path == "ks-memory");
    CHECK(c.output.dir == "ks-output");
    CHECK(c.logging.level == "info");
    CHECK(c.logging.file.empty());
    CHECK(c.serve.listen == "127.0.0.1:8470");
    CHECK(c.serve.token_env == "KS_TOKEN");
  }
}

TEST_CASE("a full valid config sets every key", "[config]") {
  temp_dir dir;
  dir.write("tasks/b.yaml");
  dir.write("tasks/a.yaml");
  auto r = parse(R"(
name: softmax-study
tasks: ["tasks/*.yaml"]
gpus:
  local: [1, 0]
  remote: ["gpu7:9001", {host: gpu8, port: 9002}, "[fe80::1]:9003"]
  worker_binary: /opt/ks/bin/kernelskill-gpu
  review_timeout_s: 30.5
  trial_cache_gib: 48.5
budgets:
  seeds: 2
  rounds: 0
  repair_attempts: 1
  tasks_in_flight: 3
  llm_requests_in_flight: 16
  device_queue_depth: 4
coder:
  backend: llm
  llm:
    provider: anthropic
    endpoint: https://llm.example.com/v1
    model: some-model
    api_key_env: MY_KEY
    timeout_s: 30
    reply_timeout_s: 600
    stream: false
    max_retries: 0
    temperature: 0
    max_tokens: 4096
    reasoning: true
    reasoning_effort: low
    context_tokens: 32768
    prompt_tokens: 12000
    cache_dir: .llm-cache
review:
  trials: 9
  suspicious_speedup: 50
  size: small
ablation:
  long_term_memory: false
  short_term_memory: no
memory:
  path: /var/lib/ks/memory
output:
  dir: out
logging:
  level: debug
  file: ks.log
serve:
  listen: "0.0.0.0:9000"
  token_env: SERVE_TOKEN
)",
                 dir.path);
  INFO((r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  const auto& c = *r;
  CHECK(c.name == "softmax-study");
  CHECK(c.tasks ==
        std::vector<std::string>{(dir.path / "tasks/a.yaml").string(), (dir.path / "tasks/b.yaml").string()});
  CHECK_FALSE(c.gpus.local_all);
  CHECK(c.gpus.local_devices == std::vector<int>{1, 0});
  CHECK(c.gpus.remote == std::vector<ks::remote_worker>{{"gpu7", 9001}, {"gpu8", 9002}, {"fe80::1", 9003}});
  CHECK(c.gpus.worker_binary == "/opt/ks/bin/kernelskill-gpu");
  CHECK(c.gpus.review_timeout_s == 30.5);
  CHECK(c.gpus.trial_cache_gib == 48.5);
  CHECK(c.budgets.seeds == 2);
  CHECK(c.budgets.rounds == 0);
  CHECK(c.budgets.repair_attempts == 1);
  CHECK(c.budgets.tasks_in_flight == 3);
  CHECK(c.budgets.llm_requests_in_flight == 16);
  CHECK(c.budgets.device_queue_depth == 4);
  CHECK(c.coder.backend == "llm");
  CHECK(c.coder.llm.provider == "anthropic");
  CHECK(c.coder.llm.endpoint == "https://llm.example.com/v1");
  CHECK(c.coder.llm.model == "some-model");
  CHECK(c.coder.llm.api_key_env == "MY_KEY");
  CHECK(c.coder.llm.timeout_s == 30);
  CHECK(c.coder.llm.max_retries == 0);
  CHECK(c.coder.llm.temperature == 0);
  CHECK(c.coder.llm.max_tokens == 4096);
  CHECK(c.coder.llm.reply_timeout_s == 600);
  CHECK_FALSE(c.coder.llm.stream);
  CHECK(c.coder.llm.reasoning);
  CHECK(c.coder.llm.reasoning_effort == "low");
  CHECK(c.coder.llm.context_tokens == 32768);
  CHECK(c.coder.llm.prompt_tokens == 12000);
  CHECK(c.coder.llm.cache_dir == ".llm-cache");
  CHECK(c.review.trials == 9);
  CHECK(c.review.suspicious_speedup == 50);
  CHECK(c.review.size == "small");
  CHECK_FALSE(c.ablation.long_term_memory);
  CHECK_FALSE(c.ablation.short_term_memory);
  CHECK(c.memory.path == "/var/lib/ks/memory");
  CHECK(c.output.dir == "out");
  CHECK(c.logging.level == "debug");
  CHECK(c.logging.file == "ks.log");
  CHECK(c.serve.listen == "0.0.0.0:9000");
  CHECK(c.serve.token_env == "SERVE_TOKEN");
}

TEST_CASE("gpus.local accepts all, none and explicit lists", "[config]") {
  auto none = parse("gpus: {local: none}\n");
  REQUIRE(none.ok());
  CHECK_FALSE(none->gpus.local_all);
  CHECK(none->gpus.local_devices.empty());
  auto empty = parse("gpus: {local: []}\n");
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->gpus.local_all);
  CHECK(empty->gpus.local_devices.empty());
  auto all = parse("gpus: {local: all}\n");
  REQUIRE(all.ok());
  CHECK(all->gpus.local_all);
}

TEST_CASE("task paths resolve against the config file's directory, globs sorted", "[config]") {
  temp_dir dir;
  const fs::path cfg_dir = dir.path / "experiments";
  dir.write("experiments/tasks/zeta.yaml");
  dir.write("experiments/tasks/alpha.yaml");
  dir.write("experiments/tasks/mid.yaml");
  dir.write("experiments/tasks/notes.txt");
  fs::create_directories(cfg_dir / "tasks/sub.yaml");  // a directory: globs skip it
  dir.write("shared/common.yaml");
  dir.write("odd/[x].yaml");  // brackets are literal, not a glob class
  dir.write("abs/one.yaml");
  const fs::path cfg = dir.write("experiments/exp.yaml",
                                 "tasks:\n"
                                 "  - tasks/m?d.yaml\n"
                                 "  - tasks/*.yaml\n"
                                 "  - ../shared/common.yaml\n"
                                 "  - ../odd/[x]*.yaml\n"
                                 "  - " +
                                     (dir.path / "abs/one.yaml").string() + "\n");
  // The process's working directory must not matter.
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir.path / "abs");
  auto r = ks::load_config(cfg);
  fs::current_path(old_cwd);
  INFO((r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  CHECK(r->source == cfg.string());
  CHECK(r->tasks == std::vector<std::string>{
                        (cfg_dir / "tasks/mid.yaml").string(),  // named first, kept first
                        (cfg_dir / "tasks/alpha.yaml").string(),
                        (cfg_dir / "tasks/zeta.yaml").string(),
                        (dir.path / "shared/common.yaml").string(),
                        (dir.path / "odd/[x].yaml").string(),
                        (dir.path / "abs/one.yaml").string(),
                    });
  for (const auto& t : r->tasks) CHECK(fs::path(t).is_absolute());
}

TEST_CASE("a relative config path resolves tasks against its own directory", "[config]") {
  temp_dir dir;
  dir.write("cfg/t.yaml");
  dir.write("cfg/exp.yaml", "tasks: [t.yaml]\n");
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir.path);
  auto r = ks::load_config("cfg/exp.yaml");
  fs::current_path(old_cwd);
  INFO((r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  CHECK(r->source == "cfg/exp.yaml");
  CHECK(r->tasks == std::vector<std::string>{(dir.path / "cfg/t.yaml").string()});
}

TEST_CASE("to_yaml round-trips through parse_config", "[config]") {
  temp_dir dir;
  dir.write("a b/task one.yaml");
  ks::experiment_config c;
  c.name = "null";  // strings that look like other YAML types stay strings
  c.source = "exp.yaml";
  c.tasks = {(dir.path / "a b/task one.yaml").string()};
  c.gpus.local_all = false;
  c.gpus.local_devices = {3, 1};
  c.gpus.remote = {{"gpu1", 8471}, {"::1", 8472}};
  c.gpus.worker_binary = "bin/kernelskill-gpu";
  c.gpus.review_timeout_s = 0.1;
  c.gpus.trial_cache_gib = 0.75;
  c.budgets = {.seeds = 1,
               .rounds = 0,
               .repair_attempts = 7,
               .tasks_in_flight = 5,
               .llm_requests_in_flight = 9,
               .device_queue_depth = 11};
  c.coder.backend = "llm";
  c.coder.llm = {.provider = "anthropic",
                 .endpoint = "http://localhost:8000/v1",
                 .model = "true",
                 .api_key_env = "K",
                 .timeout_s = 1e-3,
                 .reply_timeout_s = 90,
                 .stream = false,
                 .max_retries = 0,
                 .temperature = 1.7,
                 .max_tokens = 1,
                 .reasoning = true,
                 .reasoning_effort = "medium",
                 .context_tokens = 4096,
                 .prompt_tokens = 100,
                 .cache_dir = "#not-a-comment"};
  c.review = {.trials = 2, .suspicious_speedup = 1.5, .size = "a: b"};
  c.ablation = {.long_term_memory = false, .short_term_memory = true};
  c.memory.path = "~";
  c.output.dir = "'quoted'";
  c.logging = {.level = "off", .file = ""};
  c.serve = {.listen = "[::]:1", .token_env = ""};

  for (const ks::experiment_config& original : {c, defaults_from("exp.yaml")}) {
    const std::string text = ks::to_yaml(original);
    INFO(text);
    auto back = parse(text, dir.path);
    INFO((back.ok() ? "" : back.message()));
    REQUIRE(back.ok());
    CHECK(*back == original);
    CHECK(ks::to_yaml(*back) == text);
  }
}

TEST_CASE("review.draw_inputs is device by default, cpu when asked, nothing else", "[config]") {
  CHECK(defaults_from("exp.yaml").review.draw_inputs == "device");
  auto empty = parse("name: t\n");
  REQUIRE(empty.ok());
  CHECK(empty->review.draw_inputs == "device");
  auto cpu = parse("review:\n  draw_inputs: cpu\n");
  REQUIRE(cpu.ok());
  CHECK(cpu->review.draw_inputs == "cpu");
  auto back = parse(ks::to_yaml(*cpu));
  REQUIRE(back.ok());
  CHECK(back->review.draw_inputs == "cpu");
  CHECK(rejected("review:\n  draw_inputs: gpu\n") ==
        "exp.yaml:2:16: review.draw_inputs: expected one of device, cpu, got \"gpu\" "
        "(device draws on the reviewing GPU)");
  CHECK_THAT(rejected("review: {draw_inputs: cpus}\n"),
             Contains("review.draw_inputs: expected one of device, cpu, got \"cpus\" (did you mean 'cpu'?)"));
  CHECK_THAT(rejected("draw_inputs: cpu\n"), Contains("did you mean 'review.draw_inputs'?"));
}

TEST_CASE("gpus.profile_replay is user by default, kernel when asked, nothing else", "[config]") {
  CHECK(defaults_from("exp.yaml").gpus.profile_replay == "user");
  auto kernel = parse("gpus:\n  profile_replay: kernel\n");
  REQUIRE(kernel.ok());
  CHECK(kernel->gpus.profile_replay == "kernel");
  auto back = parse(ks::to_yaml(*kernel));
  REQUIRE(back.ok());
  CHECK(back->gpus.profile_replay == "kernel");
  CHECK_THAT(rejected("gpus:\n  profile_replay: bogus\n"),
             Contains("exp.yaml:2:19: gpus.profile_replay: expected one of user, kernel, got \"bogus\""));
  CHECK_THAT(rejected("profile_replay: user\n"), Contains("did you mean 'gpus.profile_replay'?"));
}

TEST_CASE("parse_host_port reads HOST:PORT and bracketed IPv6", "[config]") {
  CHECK(*ks::parse_host_port("gpu1:8471") == ks::remote_worker{"gpu1", 8471});
  CHECK(*ks::parse_host_port("10.0.0.2:1") == ks::remote_worker{"10.0.0.2", 1});
  CHECK(*ks::parse_host_port("[::1]:65535") == ks::remote_worker{"::1", 65535});
  CHECK(ks::to_string(ks::remote_worker{"::1", 80}) == "[::1]:80");
  CHECK(ks::to_string(ks::remote_worker{"gpu1", 80}) == "gpu1:80");
  for (const char* bad : {"", "gpu1", "gpu1:", ":80", "gpu1:0", "gpu1:65536", "gpu1:80x", "::1:80", "[::1]80",
                          "http://gpu1:80", "gpu 1:80"}) {
    INFO(bad);
    auto r = ks::parse_host_port(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("expected HOST:PORT"));
  }
}

// ---------------------------------------------------------------------------
// Bad input: each kind is refused, and the message says where and what.

TEST_CASE("rejects: YAML syntax errors, with their position", "[config][bad]") {
  const std::string m = rejected("name: x\nbudgets:\n  seeds: [1, 2\n  rounds: 3\n");
  CHECK_THAT(m, Contains("YAML syntax error"));
  CHECK_THAT(m, StartsWith("exp.yaml:4:"));
  CHECK_THAT(rejected("a: b: c\n"), StartsWith("exp.yaml:1:5: YAML syntax error"));
  CHECK_THAT(rejected("budgets:\n\tseeds: 2\n"), Contains("line 2 is indented with a tab"));
}

TEST_CASE("rejects: a top level that is not a map", "[config][bad]") {
  CHECK_THAT(rejected("- a\n- b\n"), Contains("exp.yaml:1:1: the top level must be a map"));
  CHECK_THAT(rejected("- a\n- b\n"), Contains("got a list"));
  CHECK_THAT(rejected("just text\n"), Contains("got \"just text\""));
}

TEST_CASE("rejects: more than one YAML document", "[config][bad]") {
  CHECK_THAT(rejected("name: a\n---\nname: b\n"), Contains("exp.yaml:3:1: a config is one YAML document"));
}

TEST_CASE("rejects: unknown keys, suggesting the close one", "[config][bad]") {
  CHECK(rejected("name: x\nbudget:\n  seeds: 2\n") == "exp.yaml:2:1: unknown key 'budget' (did you mean 'budgets'?)");
  CHECK(rejected("budgets:\n  rounds: 3\n  sedes: 2\n") ==
        "exp.yaml:3:3: unknown key 'budgets.sedes' (did you mean 'budgets.seeds'?)");
  // A key of another section points there.
  CHECK(rejected("rounds: 3\n") == "exp.yaml:1:1: unknown key 'rounds' (did you mean 'budgets.rounds'?)");
  CHECK_THAT(rejected("coder:\n  endpoint: http://x\n"),
             Contains("unknown key 'coder.endpoint' (did you mean 'coder.llm.endpoint'?)"));
  // Nothing close: list what is known.
  const std::string m = rejected("review:\n  colour: blue\n");
  CHECK_THAT(m, StartsWith("exp.yaml:2:3: unknown key 'review.colour'"));
  CHECK_THAT(m, Contains("known keys of review: trials, suspicious_speedup, size"));
}

TEST_CASE("rejects: the same key twice", "[config][bad]") {
  CHECK(rejected("budgets:\n  seeds: 2\n  seeds: 3\n") ==
        "exp.yaml:3:3: duplicate key 'budgets.seeds' (first given at 2:3)");
}

TEST_CASE("rejects: a string where an integer belongs", "[config][bad]") {
  // The documented example, to the column.
  CHECK(rejected("# exp\nname: x\n\n\n\nbudgets:\n  rounds: fifteen\n") ==
        "exp.yaml:7:11: budgets.rounds: expected a non-negative integer, got \"fifteen\"");
  CHECK(rejected("budgets:\n  seeds: 2.5\n") == "exp.yaml:2:10: budgets.seeds: expected a positive integer, got 2.5");
  CHECK(rejected("coder:\n  llm:\n    max_tokens: \"4096\"\n") ==
        "exp.yaml:3:17: coder.llm.max_tokens: expected a positive integer, got \"4096\" "
        "(a quoted string: remove the quotes)");
  CHECK_THAT(rejected("budgets:\n  seeds: 99999999999999999999\n"),
             Contains("budgets.seeds: expected a positive integer, got 99999999999999999999 (too large)"));
}

TEST_CASE("rejects: a map or list where another type belongs", "[config][bad]") {
  CHECK(rejected("tasks: {a: b}\n") == "exp.yaml:1:8: tasks: expected a list of task files or globs, got a map");
  CHECK_THAT(rejected("tasks: x.yaml\n"), Contains("exp.yaml:1:8: tasks: expected a list"));
  CHECK_THAT(rejected("tasks: x.yaml\n"), Contains("write [\"x.yaml\"]"));
  CHECK_THAT(rejected("budgets: [1, 2]\n"),
             StartsWith("exp.yaml:1:10: budgets: expected a map with keys seeds, rounds"));
  CHECK(rejected("name: [a]\n") == "exp.yaml:1:7: name: expected a string, got a list");
  CHECK(rejected("review:\n  trials: {n: 3}\n") ==
        "exp.yaml:2:11: review.trials: expected a positive integer, got a map");
  CHECK_THAT(rejected("gpus:\n  remote: gpu1:80\n"),
             Contains("exp.yaml:2:11: gpus.remote: expected a list of \"HOST:PORT\" strings"));
}

TEST_CASE("rejects: an empty value for a setting, at the key's line", "[config][bad]") {
  // yaml-cpp marks an empty value at the next token; the message points at the key.
  CHECK(rejected("budgets:\n  rounds:\n\n\nname: x\n") ==
        "exp.yaml:2:3: budgets.rounds: expected a non-negative integer, got nothing");
  CHECK_THAT(rejected("name:\n"), StartsWith("exp.yaml:1:1: name: expected a non-empty string, got nothing"));
}

TEST_CASE("rejects: counts below their minimum", "[config][bad]") {
  CHECK(rejected("budgets:\n  seeds: 0\n") == "exp.yaml:2:10: budgets.seeds: expected a positive integer, got 0");
  CHECK(rejected("budgets:\n  rounds: -1\n") ==
        "exp.yaml:2:11: budgets.rounds: expected a non-negative integer, got -1");
  for (const char* key : {"repair_attempts", "tasks_in_flight", "llm_requests_in_flight", "device_queue_depth"}) {
    CHECK_THAT(
        rejected(std::string("budgets:\n  ") + key + ": 0\n"),
        StartsWith("exp.yaml:2:") && Contains(std::string("budgets.") + key + ": expected a positive integer, got 0"));
  }
  CHECK_THAT(rejected("review: {trials: 0}\n"), Contains("review.trials: expected a positive integer, got 0"));
  CHECK_THAT(rejected("coder: {llm: {max_retries: -2}}\n"),
             Contains("coder.llm.max_retries: expected a non-negative integer, got -2"));
}

TEST_CASE("rejects: numbers out of range (temperature, timeouts, speedup)", "[config][bad]") {
  CHECK(rejected("coder:\n  llm:\n    temperature: 2.5\n") ==
        "exp.yaml:3:18: coder.llm.temperature: expected a number from 0 to 2, got 2.5");
  CHECK_THAT(rejected("coder: {llm: {temperature: -0.1}}\n"), Contains("coder.llm.temperature"));
  CHECK(rejected("gpus:\n  trial_cache_gib: -1\n") ==
        "exp.yaml:2:20: gpus.trial_cache_gib: expected a number of GiB from 0 (0: half of each device's "
        "memory) to 1048576, got -1");
  CHECK(rejected("gpus:\n  review_timeout_s: 0\n") ==
        "exp.yaml:2:21: gpus.review_timeout_s: expected a number of seconds greater than 0, got 0");
  CHECK_THAT(rejected("coder: {llm: {timeout_s: -5}}\n"),
             Contains("coder.llm.timeout_s: expected a number of seconds greater than 0, got -5"));
  CHECK_THAT(rejected("coder: {llm: {timeout_s: .inf}}\n"), Contains("coder.llm.timeout_s"));
  CHECK_THAT(rejected("review: {suspicious_speedup: 1}\n"),
             Contains("review.suspicious_speedup: expected a number greater than 1, got 1"));
}

TEST_CASE("rejects: ports outside 1-65535 (0-65535 for serve.listen)", "[config][bad]") {
  CHECK(rejected("gpus:\n  remote:\n    - {host: gpu1, port: 70000}\n") ==
        "exp.yaml:3:26: gpus.remote[0].port: expected a port number from 1 to 65535, got 70000");
  CHECK_THAT(rejected("gpus:\n  remote: [\"gpu1:0\"]\n"),
             Contains("exp.yaml:2:12: gpus.remote[0]: expected HOST:PORT"));
  CHECK_THAT(rejected("serve:\n  listen: \"127.0.0.1:99999\"\n"),
             Contains("exp.yaml:2:11: serve.listen: expected HOST:PORT (like gpu1:8471), got \"127.0.0.1:99999\" "
                      "(the port must be a number from 0 to 65535)"));
  // Port 0 is a listening socket's "any free port"; a remote node needs a real one.
  auto any = ks::parse_config("serve:\n  listen: \"127.0.0.1:0\"\n", "exp.yaml", "");
  REQUIRE(any.ok());
  CHECK(any->serve.listen == "127.0.0.1:0");
}

TEST_CASE("rejects: malformed host:port and incomplete remote nodes", "[config][bad]") {
  CHECK(rejected("gpus:\n  remote:\n    - gpu1\n") ==
        "exp.yaml:3:7: gpus.remote[0]: expected HOST:PORT (like gpu1:8471), got \"gpu1\" (no :PORT)");
  CHECK_THAT(rejected("gpus:\n  remote: [\"fe80::1:80\"]\n"), Contains("gpus.remote[0]") && Contains("brackets"));
  CHECK_THAT(rejected("gpus:\n  remote: [\"http://gpu1:80\"]\n"), Contains("gpus.remote[0]") && Contains("URL"));
  CHECK_THAT(rejected("serve: {listen: localhost}\n"), Contains("serve.listen: expected HOST:PORT"));
  CHECK_THAT(rejected("gpus:\n  remote:\n    - {host: gpu1}\n"),
             Contains("exp.yaml:3:7: gpus.remote[0]: missing 'port'"));
  CHECK_THAT(rejected("gpus:\n  remote:\n    - {host: gpu1, port: 1, user: me}\n"),
             Contains("unknown key 'gpus.remote[0].user'"));
}

TEST_CASE("rejects: the same remote node twice", "[config][bad]") {
  CHECK(rejected("gpus:\n  remote:\n    - gpu1:8471\n    - {host: GPU1, port: 8471}\n") ==
        "exp.yaml:4:7: gpus.remote[1]: duplicate node GPU1:8471 (first listed at 3:7)");
}

TEST_CASE("rejects: bad gpus.local values", "[config][bad]") {
  CHECK(rejected("gpus:\n  local: several\n") ==
        "exp.yaml:2:10: gpus.local: expected all, none or a list of device indices, got \"several\"");
  CHECK_THAT(rejected("gpus: {local: al}\n"), Contains("(did you mean 'all'?)"));
  CHECK_THAT(rejected("gpus: {local: 0}\n"), Contains("gpus.local") && Contains("write [0] for one device"));
  CHECK_THAT(rejected("gpus: {local: [0, -1]}\n"),
             Contains("gpus.local[1]: expected a device index (0, 1, ...), got -1"));
  CHECK_THAT(rejected("gpus:\n  local: [0, 0]\n"),
             Contains("exp.yaml:2:14: gpus.local[1]: device 0 is listed twice (first at 2:11)"));
}

TEST_CASE("rejects: values outside an enumeration", "[config][bad]") {
  CHECK(rejected("coder:\n  backend: gpt\n") ==
        "exp.yaml:2:12: coder.backend: expected one of rules, llm, hybrid, got \"gpt\"");
  CHECK_THAT(rejected("coder:\n  llm:\n    reasoning_effort: extreme\n"),
             Contains("coder.llm.reasoning_effort: expected one of minimal, low, medium, high"));
  CHECK_THAT(rejected("coder:\n  llm:\n    context_tokens: -1\n"), Contains("coder.llm.context_tokens"));
  CHECK(rejected("coder:\n  llm:\n    provider: opanai\n") ==
        "exp.yaml:3:15: coder.llm.provider: expected one of openai, anthropic, got \"opanai\" "
        "(did you mean 'openai'?)");
  CHECK(rejected("logging:\n  level: verbose\n") ==
        "exp.yaml:2:10: logging.level: expected one of trace, debug, info, warn, error, off, got \"verbose\"");
  CHECK_THAT(rejected("logging: {level: warning}\n"), Contains("(did you mean 'warn'?)"));
}

TEST_CASE("rejects: bad booleans", "[config][bad]") {
  CHECK(rejected("ablation:\n  long_term_memory: maybe\n") ==
        "exp.yaml:2:21: ablation.long_term_memory: expected true or false, got \"maybe\"");
  CHECK_THAT(rejected("ablation: {short_term_memory: \"false\"}\n"),
             Contains("ablation.short_term_memory") && Contains("remove the quotes"));
  CHECK_THAT(rejected("ablation: {short_term_memory: 1}\n"), Contains("ablation.short_term_memory"));
}

TEST_CASE("rejects: coder.backend llm without an endpoint or model", "[config][bad]") {
  const std::string m = rejected("coder:\n  backend: llm\n");
  CHECK_THAT(m, Contains("exp.yaml:2:12: coder.backend: is llm, so coder.llm.endpoint must be set"));
  CHECK_THAT(m, Contains("exp.yaml:2:12: coder.backend: is llm, so coder.llm.model must be set"));
  CHECK_THAT(rejected("coder:\n  llm: {endpoint: \"https://x/v1\"}\n  backend: llm\n"),
             Contains("exp.yaml:3:12") && Contains("coder.llm.model must be set") && !Contains("endpoint must be set"));
  CHECK_THAT(rejected("coder:\n  backend: hybrid\n"),
             Contains("coder.backend: is hybrid, so coder.llm.endpoint must be set"));
  CHECK_THAT(rejected("coder: {llm: {endpoint: api.example.com}}\n"),
             Contains("coder.llm.endpoint: expected an http:// or https:// URL"));
}

TEST_CASE("rejects: an API key where an environment variable name belongs", "[config][bad]") {
  const std::string m = rejected("coder:\n  llm:\n    api_key_env: sk-abc123secret\n");
  CHECK_THAT(m, StartsWith("exp.yaml:3:18: coder.llm.api_key_env: expected the name of an environment variable"));
  CHECK_THAT(m, !Contains("sk-abc123secret"));  // never echo a secret into logs
  CHECK_THAT(rejected("serve: {token_env: \"my token\"}\n"), Contains("serve.token_env"));
}

TEST_CASE("rejects: a task file that does not exist, naming the directory", "[config][bad]") {
  temp_dir dir;
  dir.write("tasks/present.yaml");
  const std::string m = rejected("tasks:\n  - tasks/present.yaml\n  - tasks/absent.yaml\n", dir.path);
  CHECK(m == "exp.yaml:3:5: tasks[1]: task file \"tasks/absent.yaml\" does not exist (looked in " +
                 (dir.path / "tasks").string() + ")");
  CHECK_THAT(rejected("tasks: [tasks]\n", dir.path),
             Contains("tasks[0]: \"tasks\" is a directory, not a task file (use \"tasks/*.yaml\""));
  CHECK_THAT(rejected("tasks: [\"\"]\n", dir.path), Contains("tasks[0]: expected a non-empty string"));
}

TEST_CASE("rejects: a task glob that matches nothing, naming the directory", "[config][bad]") {
  temp_dir dir;
  dir.write("tasks/a.txt");
  CHECK(rejected("tasks: [\"tasks/*.yaml\"]\n", dir.path) ==
        "exp.yaml:1:9: tasks[0]: no task files match \"tasks/*.yaml\" in " + (dir.path / "tasks").string());
  CHECK(rejected("tasks: [\"missing/*.yaml\"]\n", dir.path) ==
        "exp.yaml:1:9: tasks[0]: no task files match \"missing/*.yaml\" (directory " + (dir.path / "missing").string() +
            " does not exist)");
}

TEST_CASE("rejects: a missing config file, naming the path", "[config][bad]") {
  temp_dir dir;
  const fs::path p = dir.path / "nope.yaml";
  auto r = ks::load_config(p);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == p.string() + ": config file not found (looked for " + p.string() + ")");
  auto d = ks::load_config(dir.path);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.message(), Contains("is a directory, not a config file"));
}

TEST_CASE("reports every problem in a file at once, one per line", "[config][bad]") {
  const std::string m = rejected("budgets:\n  seeds: 0\n  rounds: x\nlogging: {level: loud}\nnmae: y\n");
  CHECK(m ==
        "exp.yaml:2:10: budgets.seeds: expected a positive integer, got 0\n"
        "exp.yaml:3:11: budgets.rounds: expected a non-negative integer, got \"x\"\n"
        "exp.yaml:4:18: logging.level: expected one of trace, debug, info, warn, error, off, got \"loud\"\n"
        "exp.yaml:5:1: unknown key 'nmae' (did you mean 'name'?)");
}

// ---------------------------------------------------------------------------
// The shipped example and reference.

TEST_CASE("examples/experiment.yaml names every key that to_yaml writes", "[config][example]") {
  const fs::path example = fs::path(KS_SOURCE_DIR) / "examples/experiment.yaml";
  REQUIRE(fs::exists(example));
  std::set<std::string> in_example, all;
  key_paths(YAML::LoadFile(example.string()), "", in_example);
  key_paths(YAML::Load(ks::to_yaml(ks::experiment_config{})), "", all);
  for (const auto& k : all) {
    INFO("key " << k);
    CHECK(in_example.count(k) == 1);
  }
  // And docs/configuration.md documents each of them.
  const std::string docs = read_file(fs::path(KS_SOURCE_DIR) / "docs/configuration.md");
  for (const auto& k : all) {
    INFO("key " << k);
    CHECK_THAT(docs, Contains("`" + k + "`"));
  }
}

TEST_CASE("examples/experiment.yaml is valid (copy with a stand-in task)", "[config][example]") {
  temp_dir dir;
  fs::copy_file(fs::path(KS_SOURCE_DIR) / "examples/experiment.yaml", dir.path / "experiment.yaml");
  dir.write("tasks/stand_in.yaml");
  auto r = ks::load_config(dir.path / "experiment.yaml");
  INFO((r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  CHECK(r->tasks == std::vector<std::string>{(dir.path / "tasks/stand_in.yaml").string()});
}

TEST_CASE("examples/experiment.yaml loads from the source tree", "[config][example]") {
  const fs::path examples = fs::path(KS_SOURCE_DIR) / "examples";
  bool has_tasks = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(examples / "tasks", ec)) {
    if (e.path().extension() == ".yaml" && e.is_regular_file()) has_tasks = true;
  }
  if (!has_tasks) {
    WARN("skipped: " << (examples / "tasks").string() << " holds no *.yaml task yet");
    return;
  }
  auto r = ks::load_config(examples / "experiment.yaml");
  INFO((r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  CHECK_FALSE(r->tasks.empty());
  for (const auto& t : r->tasks) CHECK(fs::path(t).parent_path() == (examples / "tasks").lexically_normal());
}
