// The hybrid coder with both of its real parts: the rules coder (templates lowered from
// the graph that kernelskill-gpu --graph exports, no GPU) and the llm coder talking HTTP
// to a model server on loopback. The templates write first; the model is asked only
// where they stop, and every request it gets is counted.

#include <catch2/catch.hpp>

#include <filesystem>
#include <mutex>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "coder/hybrid_coder.hpp"
#include "coder/llm_coder.hpp"
#include "coder/rules_coder.hpp"
#include "llm/llm_client.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "policy/decision_policy.hpp"
#include "policy/skill_library.hpp"
#include "protocol/requests.hpp"
#include "task/task_loader.hpp"
#include "tests/support/llm_fake_server.hpp"

namespace fs = std::filesystem;
using namespace ks;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const fs::path kSource = KS_SOURCE_DIR;

const bool quiet_logs = [] {
  spdlog::set_level(spdlog::level::err);
  return true;
}();

std::string blocks(const std::string& source, const std::string& plan) {
  return "```cuda\n" + source + "```\n\n```yaml\n" + plan + "```\n";
}

const char* kPlan = R"(constants:
  N: x.numel
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - kernel: relu_f32
    grid: [ceil_div(N, 256)]
    block: [256]
    args: [x, y, {int64: N}]
)";

// A model that answers each agent with a distinct ReLU kernel, and counts who asked.
struct model {
  testing::llm_fake_server server;
  std::mutex mu;
  std::map<std::string, int> asked;
  std::vector<std::string> prompts;
  std::unique_ptr<llm_client> client;
  std::shared_ptr<llm_coder> coder;

  model() {
    server.set_handler([this](const testing::recorded_request& r) {
      const json body = r.body_json();
      const std::string system = body["messages"][0]["content"];
      const std::string user = body["messages"].back()["content"];
      std::lock_guard lock(mu);
      prompts.push_back(user);
      for (const char* agent : {"generator", "optimizer", "repairer", "diagnoser"})
        if (system.find(std::string("You are the ") + agent) != std::string::npos) {
          const int n = ++asked[agent];
          if (std::string(agent) == "diagnoser")
            return testing::openai_ok(
                "```json\n{\"diagnosis\": \"the bound is wrong\", \"actions\": [\"fix it\"]}\n```\n");
          return testing::openai_ok(blocks("// " + std::string(agent) + " " + std::to_string(n) +
                                               "\nextern \"C\" __global__ void relu_f32(const float* x, float* y, "
                                               "long long n) {\n  long long i = blockIdx.x * 256LL + threadIdx.x;\n"
                                               "  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];\n}\n",
                                           kPlan));
        }
      return testing::openai_ok("?");
    });
    llm_client_options o;
    o.llm.endpoint = server.url("/v1");
    o.llm.model = "test-model";
    o.llm.timeout_s = 10;
    o.backoff_initial_s = 0.01;
    auto c = llm_client::create(o);
    REQUIRE(c.ok());
    client = std::move(*c);
    llm_coder_options lo;
    lo.chat = chat_with(*client);
    coder = std::make_shared<llm_coder>(lo);
  }
  int count(const std::string& agent) {
    std::lock_guard lock(mu);
    return asked[agent];
  }
};

std::shared_ptr<rules_coder> templates() {
  rules_coder_options o;
  o.gpu_worker = fs::path(KS_BINARY_DIR) / "bin" / "kernelskill-gpu";
  o.skills_dir = kSource / "skills";
  auto r = rules_coder::create(o);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  return std::shared_ptr<rules_coder>(std::move(*r));
}

task_spec relu_task() {
  auto t = load_task(kSource / "bench" / "suites" / "ops" / "relu.yaml");
  REQUIRE(t.ok());
  return *t;
}

std::vector<std::string> methods_of(const candidate& c) {
  std::vector<std::string> out;
  if (!c.recipe.count("methods")) return out;
  std::stringstream in(c.recipe.at("methods"));
  for (std::string m; std::getline(in, m, ',');) out.push_back(m);
  return out;
}

}  // namespace

TEST_CASE("hybrid seeds: the templates' first, the model writes only the ones they lack", "[llm][hybrid]") {
  model m;
  auto rules = templates();
  hybrid_coder hybrid(rules, m.coder);
  const auto task = relu_task();
  auto own = rules->seeds(task, 16);
  REQUIRE(own.ok());
  const uint32_t k = static_cast<uint32_t>(own->size());
  REQUIRE(k >= 1);

  auto enough = hybrid.seeds(task, k);
  REQUIRE(enough.ok());
  CHECK(enough->size() == k);
  CHECK(m.server.request_count() == 0);  // no token spent
  for (const auto& c : *enough) {
    CHECK(hybrid_coder::rules_written(c));
    CHECK(c.recipe.at("other_methods") == "model");
  }

  auto more = hybrid.seeds(task, k + 2);
  REQUIRE(more.ok());
  REQUIRE(more->size() == k + 2);
  CHECK(m.count("generator") == 2);
  for (uint32_t i = 0; i < k; ++i) CHECK(hybrid_coder::rules_written((*more)[i]));
  for (uint32_t i = k; i < k + 2; ++i) {
    CHECK_FALSE(hybrid_coder::rules_written((*more)[i]));
    CHECK((*more)[i].recipe.at("coder") == "llm");
    CHECK_THAT((*more)[i].origin, Contains("seed:llm-"));
  }
}

TEST_CASE("hybrid optimize: a method the templates have goes to them, another to the model", "[llm][hybrid]") {
  model m;
  auto rules = templates();
  hybrid_coder hybrid(rules, m.coder);
  const auto task = relu_task();
  auto seeds = hybrid.seeds(task, 1);
  REQUIRE(seeds.ok());
  const candidate base = seeds->front();
  const auto can = methods_of(base);
  REQUIRE_FALSE(can.empty());

  optimize_input in;
  in.task = task;
  in.base = base;
  in.plan.chosen = can.front();
  auto by_rules = hybrid.optimize(in);
  INFO((by_rules ? std::string() : by_rules.message()));
  REQUIRE(by_rules.ok());
  CHECK(hybrid_coder::rules_written(*by_rules));
  CHECK(m.server.request_count() == 0);

  // A method the templates have no change for on this candidate: the model's.
  auto lib = load_skill_library(kSource / "skills");
  REQUIRE(lib.ok());
  std::string other;
  for (const auto& def : lib->methods)
    if (std::find(can.begin(), can.end(), def.id) == can.end()) {
      other = def.id;
      break;
    }
  REQUIRE_FALSE(other.empty());
  in.plan.chosen = other;
  auto by_model = hybrid.optimize(in);
  INFO((by_model ? std::string() : by_model.message()));
  REQUIRE(by_model.ok());
  CHECK(m.count("optimizer") == 1);
  CHECK(by_model->recipe.at("coder") == "llm");
  CHECK_FALSE(by_model->recipe.count("template"));
  CHECK(by_model->origin == "optimize:" + other);

  // And the model's candidate stays the model's: the templates would rebuild it
  // without the model's changes.
  in.base = *by_model;
  in.base.round = 1;
  in.plan.chosen = can.front();
  auto again = hybrid.optimize(in);
  REQUIRE(again.ok());
  CHECK(m.count("optimizer") == 2);
  CHECK(again->recipe.at("coder") == "llm");
}

TEST_CASE("hybrid repair: the templates' repairs first, the model's when theirs are spent", "[llm][hybrid]") {
  model m;
  auto rules = templates();
  hybrid_coder hybrid(rules, m.coder);
  const auto task = relu_task();
  auto seeds = hybrid.seeds(task, 1);
  REQUIRE(seeds.ok());

  repair_input in;
  in.task = task;
  in.failed = seeds->front();
  in.review.status = review_status::incorrect;
  in.review.message = "output y differs from the reference";
  in.diagnosis.diagnosis = "outputs differ";
  // The failing seed: the templates' conservative parameters.
  auto first = hybrid.repair(in);
  INFO((first ? std::string() : first.message()));
  REQUIRE(first.ok());
  CHECK(hybrid_coder::rules_written(*first));
  CHECK(m.server.request_count() == 0);

  // That fails too, and the templates have nothing left for a task without
  // reductions: the model reads the failure, then writes the repair.
  in.failed = *first;
  auto second = hybrid.repair(in);
  INFO((second ? std::string() : second.message()));
  REQUIRE(second.ok());
  CHECK(m.count("diagnoser") == 1);
  CHECK(m.count("repairer") == 1);
  CHECK(second->recipe.at("coder") == "llm");
  CHECK(second->origin == "repair");
  std::lock_guard lock(m.mu);
  const std::string& repair_prompt = m.prompts.back();
  CHECK_THAT(repair_prompt, Contains("the bound is wrong"));  // the model's reading
  CHECK_THAT(repair_prompt, Contains("outputs differ"));      // behind the rules' facts
  CHECK_THAT(repair_prompt, Contains("the templates' own repairs are spent"));
}

TEST_CASE("the planner keeps to the templates' methods while one is allowed, then offers the model the others",
          "[llm][hybrid][policy]") {
  auto lib = load_skill_library(kSource / "skills");
  REQUIRE(lib.ok());
  // A memory-bound streaming kernel: the decision table offers several methods.
  policy_input in;
  in.profile.values = {{"dram_throughput_pct", 81.0}, {"sm_throughput_pct", 20.0},    {"l2_throughput_pct", 40.0},
                       {"l1_throughput_pct", 30.0},   {"achieved_occupancy_pct", 80}, {"branch_efficiency_pct", 100}};
  in.features.structure_class = "streaming";
  in.features.values = {{"uses_vector_loads", 0}};
  in.features.candidate_id = "c0";
  const auto open = decide(*lib, in);
  REQUIRE(open.ranked.size() >= 2);
  const std::string first = open.ranked[0].method, second = open.ranked[1].method;

  // The templates can do the second: it is the only one offered, with or without a model.
  in.coder_methods = std::vector<std::string>{second};
  for (bool fallback : {false, true}) {
    in.coder_fallback = fallback;
    const auto t = decide(*lib, in);
    REQUIRE(t.ranked.size() == 1);
    CHECK(t.ranked[0].method == second);
  }
  // The templates can do nothing allowed here: without a model the line would end;
  // the hybrid coder's candidates get every allowed method, for the model.
  in.coder_methods = std::vector<std::string>{"no_such_method"};
  in.coder_fallback = false;
  CHECK(decide(*lib, in).ranked.empty());
  in.coder_fallback = true;
  const auto t = decide(*lib, in);
  REQUIRE(t.ranked.size() == open.ranked.size());
  CHECK(t.ranked[0].method == first);
  CHECK(std::any_of(t.notes.begin(), t.notes.end(),
                    [](const std::string& n) { return n.find("fallback") != std::string::npos; }));
  // And a rules candidate of the hybrid coder says so in its recipe.
  plan_request req;
  req.cand.recipe = {{"template", "elementwise"}, {"methods", ""}, {"other_methods", "model"}};
  const auto made = make_policy_input(req);
  CHECK(made.coder_fallback);
  REQUIRE(made.coder_methods.has_value());
  CHECK(made.coder_methods->empty());
}
