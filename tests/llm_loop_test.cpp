// `kernelskill run` with a model, end to end, where there is no GPU and no model: the
// real CLI, the llm backend talking HTTP to the replaying model server (ks-scripted-llm:
// streamed replies as vLLM or Anthropic send them, correct kernels for the test tasks
// with one of each mistake a model makes) and the stand-in GPU worker (ks-scripted-gpu:
// real NVRTC compiles, scripted verdicts). The loop must go model seed → review →
// diagnosis → repair → plan → optimise, recover from a cut-off reply and a malformed
// plan by format repairs, and end with a kernel and a token bill for every task.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/child_process.hpp"
#include "tests/support/command_output.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using Catch::Matchers::Contains;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kBin = fs::path(KS_BINARY_DIR) / "bin";
const fs::path kReplies = kSource / "tests" / "data" / "llm_replies";

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::path scratch(const std::string& name) {
  auto d = fs::temp_directory_path() / ("ks-llm-loop-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "tasks");
  return d;
}

// The replaying server, killed with the test.
struct model_server {
  ks::testing::started_server s;
  fs::path log;
  model_server(const fs::path& dir, const std::vector<std::string>& extra) {
    log = dir / "model.jsonl";
    std::vector<std::string> args = {(kBin / "ks-scripted-llm").string(),
                                     "--until-killed",
                                     "--plans",
                                     (kSource / "examples" / "plans").string(),
                                     "--replies",
                                     kReplies.string(),
                                     "--log",
                                     log.string(),
                                     "relu=relu",
                                     "swish=" + (kReplies / "swish").string(),
                                     "row_sum=" + (kReplies / "row_sum").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    s = ks::testing::start_server(args, ks::testing::environment_without({}), (dir / "model.err").string(), 20);
  }
  ~model_server() {
    if (s.pid > 0) {
      ::kill(s.pid, SIGTERM);
      ::waitpid(s.pid, nullptr, 0);
    }
  }
  std::vector<json> requests() const {
    std::vector<json> out;
    std::istringstream in(read(log));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
};

void write_tasks(const fs::path& dir) {
  fs::copy_file(kSource / "bench" / "suites" / "ops" / "relu.yaml", dir / "tasks" / "relu.yaml");
  fs::copy_file(kSource / "examples" / "tasks" / "swish.yaml", dir / "tasks" / "swish.yaml");
  fs::copy_file(kSource / "examples" / "tasks" / "row_sum.yaml", dir / "tasks" / "row_sum.yaml");
}

void write_config(const fs::path& dir, const std::string& coder) {
  std::ofstream(dir / "experiment.yaml") << "name: llm-loop\n"
                                         << "tasks: [tasks/*.yaml]\n"
                                         << "gpus:\n  worker_binary: " << (kBin / "ks-scripted-gpu").string()
                                         << "\n  local: [0]\n"
                                         << "budgets: {seeds: 3, rounds: 2, repair_attempts: 2, tasks_in_flight: 3}\n"
                                         << "review: {trials: 2}\n"
                                         << coder << "memory: {path: " << (dir / "memory").string() << "}\n"
                                         << "output: {dir: " << (dir / "out").string() << "}\n";
}

ks::test::command_output kernelskill(const std::string& args) {
  return ks::test::run_shell((kBin / "kernelskill").string() + " " + args + " 2>&1");
}

}  // namespace

TEST_CASE("kernelskill run with a streamed OpenAI-compatible model: seed, review, repair, optimise, a token bill",
          "[llm][loop]") {
  const fs::path dir = scratch("vllm");
  write_tasks(dir);
  model_server model(dir, {"--style", "vllm"});
  REQUIRE(model.s.pid > 0);
  write_config(dir, "coder:\n  backend: llm\n  llm: {endpoint: \"http://" + model.s.address +
                        "/v1\", model: replay, timeout_s: 30}\n");
  auto run = kernelskill("run " + (dir / "experiment.yaml").string());
  INFO(run.text);
  REQUIRE(run.status == 0);

  const json summary = json::parse(read(dir / "out" / "summary.json"));
  CHECK(summary["coder"] == "llm");
  REQUIRE(summary["tasks"].size() == 3);
  int64_t in = 0, out = 0;
  for (const auto& t : summary["tasks"]) {
    INFO(t.dump());
    CHECK(t["success"] == true);
    CHECK(t["input_tokens"].get<int64_t>() > 1000);
    CHECK(t["output_tokens"].get<int64_t>() > 100);
    in += t["input_tokens"].get<int64_t>();
    out += t["output_tokens"].get<int64_t>();
  }
  // The bill is the server's own count of what was sent and received.
  int64_t served_in = 0, served_out = 0;
  std::map<std::string, int> by_agent;
  int format_repairs = 0;
  for (const auto& r : model.requests()) {
    CHECK(r["stream"] == true);
    served_in += r["input_tokens"].get<int64_t>();
    served_out += r["output_tokens"].get<int64_t>();
    ++by_agent[r["agent"].get<std::string>()];
    format_repairs += r["format_repair"].get<bool>();
  }
  CHECK(in == served_in);
  CHECK(out == served_out);
  CHECK(by_agent["generator"] >= 9);  // 3 seeds a task, and the format repairs
  CHECK(by_agent["diagnoser"] >= 3);  // each task's int64_t seed
  CHECK(by_agent["repairer"] >= 3);
  CHECK(by_agent["optimizer"] >= 3);
  CHECK(format_repairs >= 3 * 2 + 1);  // the cut-off seed and the bad plan of each task, a bad diagnosis

  // The relu line: the seed that does not compile, diagnosed and repaired, then optimised.
  auto t = kernelskill("trajectory relu --memory " + (dir / "memory").string());
  INFO(t.text);
  CHECK(t.status == 0);
  CHECK_THAT(t.text, Contains("compile_error"));
  CHECK_THAT(t.text, Contains("diagnose"));
  CHECK_THAT(t.text, Contains("repair"));
  CHECK_THAT(t.text, Contains("optimize"));
  // The method the replaying server has a kernel for was applied when chosen.
  const std::string md = read(dir / "out" / "summary.md");
  CHECK_THAT(md, Contains("Tokens:"));
  fs::remove_all(dir);
}

TEST_CASE("kernelskill run with an Anthropic model, streamed, slow tokens within the timeout", "[llm][loop]") {
  const fs::path dir = scratch("anthropic");
  write_tasks(dir);
  fs::remove(dir / "tasks" / "swish.yaml");
  fs::remove(dir / "tasks" / "row_sum.yaml");
  model_server model(dir, {"--style", "anthropic", "--token-delay-ms", "2"});
  REQUIRE(model.s.pid > 0);
  write_config(dir, "coder:\n  backend: llm\n  llm: {provider: anthropic, endpoint: \"http://" + model.s.address +
                        "\", model: claude-replay, timeout_s: 5}\n");
  auto run = kernelskill("run " + (dir / "experiment.yaml").string());
  INFO(run.text);
  REQUIRE(run.status == 0);
  const json summary = json::parse(read(dir / "out" / "summary.json"));
  REQUIRE(summary["tasks"].size() == 1);
  CHECK(summary["tasks"][0]["success"] == true);
  for (const auto& r : model.requests()) CHECK(r["path"] == "/v1/messages");
  fs::remove_all(dir);
}

TEST_CASE("kernelskill run with the hybrid coder: the templates first, tokens only where they stop",
          "[llm][loop][hybrid]") {
  const fs::path dir = scratch("hybrid");
  write_tasks(dir);
  model_server model(dir, {"--style", "llama_cpp", "--context", "32768"});
  REQUIRE(model.s.pid > 0);
  write_config(dir, "coder:\n  backend: hybrid\n  llm: {endpoint: \"http://" + model.s.address +
                        "/v1\", model: replay, timeout_s: 30}\n");
  // More seeds than the templates have designs: the model writes the rest.
  {
    std::string cfg = read(dir / "experiment.yaml");
    cfg.replace(cfg.find("seeds: 3"), 8, "seeds: 8");
    std::ofstream(dir / "experiment.yaml") << cfg;
  }
  auto run = kernelskill("run " + (dir / "experiment.yaml").string());
  INFO(run.text);
  REQUIRE(run.status == 0);
  const json summary = json::parse(read(dir / "out" / "summary.json"));
  CHECK(summary["coder"] == "hybrid");
  int64_t billed = 0;
  for (const auto& t : summary["tasks"]) {
    CHECK(t["success"] == true);
    billed += t["input_tokens"].get<int64_t>() + t["output_tokens"].get<int64_t>();
  }
  CHECK(summary["llm"]["input_tokens"].get<int64_t>() + summary["llm"]["output_tokens"].get<int64_t>() == billed);
  std::map<std::string, std::map<std::string, int>> asked;  // task → agent → requests
  int64_t served = 0;
  for (const auto& r : model.requests()) {
    ++asked[r["task"].get<std::string>()][r["agent"].get<std::string>()];
    served += r["input_tokens"].get<int64_t>() + r["output_tokens"].get<int64_t>();
  }
  CHECK(served == billed);
  for (const char* task : {"relu", "swish", "row_sum"}) {
    INFO(task);
    // Fewer seeds asked of the model than the run has: the templates wrote the others.
    CHECK(asked[task]["generator"] >= 1);
    CHECK(asked[task]["generator"] < 8);
  }
  // The templates' kernels were reviewed: the trajectory names their seeds.
  auto t = kernelskill("trajectory relu --memory " + (dir / "memory").string());
  CHECK_THAT(t.text, Contains("from hybrid: seed:"));
  CHECK_THAT(t.text, Contains("seed:llm-"));
  fs::remove_all(dir);
}

TEST_CASE("the example model configs check: one per server docs/llm.md walks through", "[llm][examples]") {
  for (const char* f :
       {"experiment-llm.yaml", "llm/vllm.yaml", "llm/llama-cpp.yaml", "llm/ollama.yaml", "llm/anthropic.yaml"}) {
    auto out = kernelskill("check " + (kSource / "examples" / f).string());
    INFO(f << ": " << out.text);
    CHECK(out.status == 0);
    CHECK_THAT(out.text, Contains(": ok ("));
    const std::string docs = read(kSource / "docs" / "llm.md");
    CHECK_THAT(docs, Contains(std::string("examples/") + f));
  }
}
