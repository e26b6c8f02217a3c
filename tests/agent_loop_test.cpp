// The optimisation loop end to end, without a GPU: real agents (CAF actors), the real
// llm coder talking HTTP to a scripted LLM server on loopback, the real decision
// policy and skill library, a real RocksDB store, real NVRTC compiles. The one part
// that cannot run here is the GPU: `scripted_gpu` stands in for the GPU pool. It
// compiles each candidate with NVRTC (compile errors are real) and then gives the
// verdict the kernel's `// verdict:` comment asks for, with the timing and profile a
// memory-bound elementwise kernel shows. The same loop runs against the real worker on
// the GPU machine (docs/agent-loop.md).

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/agents.hpp"
#include "actors/experiment_runner.hpp"
#include "actors/task_coordinator.hpp"
#include "coder/llm_coder.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "llm/llm_client.hpp"
#include "llm_fake_server.hpp"
#include "policy/skill_library.hpp"
#include "memory/store.hpp"
#include "task/task_loader.hpp"

namespace fs = std::filesystem;
using namespace ks;
using ks::testing::llm_fake_server;
using ks::testing::openai_ok;
using ks::testing::recorded_request;
using ks::testing::scripted_reply;
using json = nlohmann::json;
using Catch::Matchers::Contains;

namespace {

struct test_system_config : caf::actor_system_config {
  test_system_config() {
    register_protocol(*this);
    set("scheduler.max-threads", 4);
  }
};

const char* kTask = R"(name: relu
description: y = relu(x)
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [4096, 1024], dtype: float32}
)";

// A ReLU kernel carrying the verdict the scripted GPU gives it. `variant` makes the
// source (and so the candidate id) distinct.
std::string kernel(const std::string& verdict, const std::string& variant) {
  return "// verdict: " + verdict + "\n// variant: " + variant + R"(
extern "C" __global__ void relu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = v < 0.f ? 0.f : v; }
}
)";
}

const char* kPlan = R"(constants:
  BLOCK: 256
  N: x.numel
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - kernel: relu_f32
    grid: [ceil_div(N, BLOCK)]
    block: [BLOCK]
    args: [x, y, {int64: N}]
)";

std::string candidate_reply(const std::string& source, const std::string& plan = kPlan) {
  return "Here it is.\n\n```cuda\n" + source + "```\n\n```yaml\n" + plan + "```\n";
}

// The GPU stand-in (see the top of the file).
gpu_pool_actor::behavior_type scripted_gpu(gpu_pool_actor::pointer self,
                                           std::shared_ptr<nvrtc_compiler> nvrtc,
                                           std::shared_ptr<std::atomic<int>> reviews) {
  return {
      [](describe_atom) {
        worker_info w;
        w.host = "scripted";
        return w;
      },
      [=](const review_request& req) -> review_result {
        ++*reviews;
        review_result r;
        r.request_id = req.request_id;
        r.candidate_id = req.cand.id;
        r.device = "scripted/0";
        auto c = nvrtc->compile(req.cand.source, req.cand.compile_options);
        if (!c || !c->ok) {
          r.status = review_status::compile_error;
          r.message = c ? "compile failed" : c.message();
          if (c) r.diagnostics = c->diagnostics, r.compile_log = c->log;
          return r;
        }
        r.resources = c->resources;
        std::smatch m;
        std::regex re("// verdict: (\\w+)(?: speedup=([0-9.]+))?");
        std::string verdict = "incorrect";
        double speedup = 1.0;
        if (std::regex_search(req.cand.source, m, re)) {
          verdict = m[1];
          if (m[2].matched) speedup = std::stod(m[2]);
        }
        r.trials_run = req.options.trials;
        if (verdict == "ok") {
          r.status = review_status::ok;
          r.trials_passed = r.trials_run;
          r.reference_time.median_ms = 1.0;
          r.candidate_time.median_ms = 1.0 / speedup;
          r.speedup = speedup;
          r.profile.values = {{"dram_throughput_pct", 72.5}, {"l2_throughput_pct", 40.1},
                              {"l1_throughput_pct", 35.0},  {"sm_throughput_pct", 18.2},
                              {"achieved_occupancy_pct", 81.0},
                              {"stall_long_scoreboard_pct", 55.0},
                              {"branch_efficiency_pct", 100}};
          r.profile.kernel_launches = 1;
          r.message = "correct in every trial";
        } else if (verdict == "crash") {
          r.status = review_status::crashed;
          r.message = "an illegal memory access was encountered (context lost)";
        } else {
          r.status = review_status::incorrect;
          r.trials_passed = 0;
          r.max_abs_error = 0.5;
          r.message = "output y differs from the reference at 1024 elements";
        }
        return r;
      }};
}

// What the scripted model answers, per agent (read from the system prompt).
struct model_script {
  std::mutex mu;
  int generator = 0, optimizer = 0, repairer = 0, diagnoser = 0;
  std::vector<std::string> methods_asked;  // the optimizer's method, in order
  // Each optimizer call's verdict by call number (default: ok, 1.5x of the round).
  std::function<std::string(int call, const std::string& method)> optimize_verdict;
};

std::string method_in(const std::string& user) {
  std::smatch m;
  std::regex re("## Method to apply: [^\\n]*\\(`([a-z0-9_]+)`");
  if (std::regex_search(user, m, re)) return m[1];
  return "";
}

scripted_reply answer(model_script& s, const recorded_request& req) {
  json body = req.body_json();
  std::string system = body["messages"][0]["content"];
  std::string user = body["messages"].back()["content"];
  std::lock_guard<std::mutex> lock(s.mu);
  if (system.find("You are the diagnoser") != std::string::npos) {
    ++s.diagnoser;
    return openai_ok("```json\n{\"diagnosis\": \"the seed skips the last element\", "
                     "\"actions\": [\"fix the bound check\"]}\n```\n");
  }
  if (system.find("You are the repairer") != std::string::npos) {
    int n = ++s.repairer;
    return openai_ok(candidate_reply(kernel("ok speedup=1.1", "repair-" + std::to_string(n))));
  }
  if (system.find("You are the optimizer") != std::string::npos) {
    int n = ++s.optimizer;
    std::string method = method_in(user);
    s.methods_asked.push_back(method);
    std::string verdict = s.optimize_verdict ? s.optimize_verdict(n, method)
                                             : "ok speedup=" + std::to_string(1.1 + 0.3 * n);
    return openai_ok(candidate_reply(kernel(verdict, "opt-" + std::to_string(n) + "-" + method)));
  }
  int n = ++s.generator;
  // The first seed is wrong (the loop must diagnose and repair it); others are fine.
  return openai_ok(candidate_reply(
      kernel(n == 1 ? "incorrect" : "ok speedup=1.0", "seed-" + std::to_string(n))));
}

// A coder that crashes (throws) on its first `crashes` optimize calls: a real actor
// crash for the supervision tests.
class crashing_coder final : public coder {
 public:
  crashing_coder(std::shared_ptr<coder> inner, int crashes) : inner_(std::move(inner)), left_(crashes) {}
  std::string name() const override { return inner_->name(); }
  result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override {
    return inner_->seeds(t, n);
  }
  result<candidate> optimize(const optimize_input& in) override {
    if (left_-- > 0) throw std::runtime_error("optimizer crashed on purpose");
    return inner_->optimize(in);
  }
  result<candidate> repair(const repair_input& in) override { return inner_->repair(in); }

 private:
  std::shared_ptr<coder> inner_;
  std::atomic<int> left_;
};

struct fixture {
  fs::path dir;
  llm_fake_server server;
  model_script script;
  std::unique_ptr<llm_client> client;
  std::shared_ptr<llm_coder> model;
  std::shared_ptr<const skill_library> library;
  std::shared_ptr<store> memory;
  std::shared_ptr<nvrtc_compiler> nvrtc = std::make_shared<nvrtc_compiler>();
  std::shared_ptr<std::atomic<int>> reviews = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<usage_ledger> usage = std::make_shared<usage_ledger>();
  task_spec task;

  explicit fixture(const std::string& name) {
    dir = fs::temp_directory_path() / ("ks-agent-loop-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    server.set_handler([this](const recorded_request& r) { return answer(script, r); });
    llm_client_options o;
    o.llm.endpoint = server.url("/v1");
    o.llm.model = "test-model";
    o.llm.timeout_s = 10;
    o.backoff_initial_s = 0.01;
    o.jitter_seed = 1;
    o.ledger = usage;
    auto c = llm_client::create(o);
    REQUIRE(c.ok());
    client = std::move(*c);
    auto lib = load_skill_library(KS_SOURCE_DIR "/skills");
    REQUIRE(lib.ok());
    library = std::make_shared<const skill_library>(std::move(*lib));
    llm_coder_options lo;
    lo.chat = chat_with(*client);
    lo.library = library;
    model = std::make_shared<llm_coder>(lo);
    auto db = store::open(dir / "memory");
    REQUIRE(db.ok());
    memory = std::move(*db);
    auto t = parse_task(kTask, "relu.yaml", dir);
    INFO((t ? std::string() : t.message()));
    REQUIRE(t.ok());
    task = *t;
  }
  ~fixture() { fs::remove_all(dir); }

  coordinator_options options(uint32_t seeds, uint32_t rounds) {
    coordinator_options o;
    o.task = task;
    o.seeds = seeds;
    o.rounds = rounds;
    o.repair_attempts = 2;
    o.backend = model;
    o.model = model;
    o.library = library;
    o.memory = memory;
    o.compiler = nvrtc;
    o.agent_timeout_s = 30;
    o.usage = usage;
    return o;
  }

  std::vector<trajectory_entry> trajectory(const std::string& name = "relu") {
    auto t = memory->read_trajectory(name);
    REQUIRE(t.ok());
    return *t;
  }
};

size_t count_kind(const std::vector<trajectory_entry>& t, const std::string& kind) {
  return std::count_if(t.begin(), t.end(), [&](const trajectory_entry& e) { return e.kind == kind; });
}

}  // namespace

TEST_CASE("a failing seed is diagnosed and repaired, then optimised round by round",
          "[agents][loop]") {
  fixture f("repair");
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});

  auto o = f.options(1, 3);
  task_outcome out = run_task(sys, o, reviewer, caf::actor{});
  INFO(out.reason);
  REQUIRE(out.success);
  // seed (incorrect) → repair (1.1) → three rounds at 1.4, 1.7, 2.0.
  CHECK(out.rounds == 3);
  CHECK(out.best_review.speedup == Approx(2.0));
  CHECK(out.best.origin.rfind("optimize:", 0) == 0);
  CHECK(out.reviews == 5);
  CHECK(*f.reviews == 5);
  CHECK(out.input_tokens > 0);
  CHECK_THAT(out.reason, Contains("round budget spent"));

  auto t = f.trajectory();
  CHECK(count_kind(t, "seed") == 1);
  CHECK(count_kind(t, "review") == 5);
  CHECK(count_kind(t, "diagnose") == 1);
  CHECK(count_kind(t, "repair") == 1);
  CHECK(count_kind(t, "plan") == 3);
  CHECK(count_kind(t, "optimize") == 3);
  // Every optimisation step names the method and the class it was planned in, and
  // every review of an optimised kernel carries the method.
  for (const auto& e : t) {
    if (e.kind == "plan") CHECK_FALSE(e.method.empty());
    if (e.kind == "review" && e.candidate_id == out.best.id) {
      CHECK(e.method == out.best.origin.substr(9));
      CHECK_THAT(e.summary, Contains("[bottleneck="));
    }
  }
  // Experience: each correct optimisation is recorded with its gain.
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  CHECK(exp->size() == 3);
  for (const auto& r : *exp) CHECK(r.correct);
  // Kernels are stored, content-addressed.
  CHECK(f.memory->get_kernel(out.best.id).ok());
  // The optimizer's prompt carried the trajectory.
  bool saw_history = false;
  for (const auto& r : f.server.requests()) {
    std::string user = r.body_json()["messages"].back()["content"];
    if (user.find("## Method to apply") != std::string::npos &&
        user.find("## History of this task (oldest first") != std::string::npos)
      saw_history = true;
  }
  CHECK(saw_history);
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
}

TEST_CASE("a method that failed is not tried again in the same situation", "[agents][loop]") {
  fixture f("nogain");
  // Every optimisation is wrong: each round's method must differ from the last ones.
  f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});
  auto o = f.options(1, 3);
  o.repair_attempts = 0;  // a wrong attempt goes straight back to the best version
  // Seed 1 is wrong and cannot be repaired with 0 attempts: use a good seed.
  f.script.generator = 1;
  task_outcome out = run_task(sys, o, reviewer, caf::actor{});
  INFO(out.reason);
  REQUIRE(out.success);
  CHECK(out.best.origin.rfind("seed:", 0) == 0);
  REQUIRE(f.script.methods_asked.size() == 3);
  std::set<std::string> distinct(f.script.methods_asked.begin(), f.script.methods_asked.end());
  CHECK(distinct.size() == 3);
  // And the failures are in the experience as incorrect applications.
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  REQUIRE(exp->size() == 3);
  for (const auto& r : *exp) CHECK_FALSE(r.correct);
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
}

TEST_CASE("without short-term memory the agents see no trajectory", "[agents][ablation]") {
  fixture f("ablation");
  f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});
  auto o = f.options(1, 2);
  o.repair_attempts = 0;
  o.use_short_term_memory = false;
  task_outcome out = run_task(sys, o, reviewer, caf::actor{});
  REQUIRE(out.success);
  // The planner could not see the failure: it chose the same method again.
  REQUIRE(f.script.methods_asked.size() == 2);
  CHECK(f.script.methods_asked[0] == f.script.methods_asked[1]);
  for (const auto& r : f.server.requests()) {
    std::string user = r.body_json()["messages"].back()["content"];
    if (user.find("## Method to apply") != std::string::npos)
      CHECK_THAT(user, Contains("Nothing yet: this is the first attempt."));
  }
  // The trajectory is still written (for the report), just not read.
  CHECK(count_kind(f.trajectory(), "review") == 3);
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
}

TEST_CASE("without long-term memory the method is chosen freely", "[agents][ablation]") {
  fixture f("ltm");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});
  auto with = f.options(1, 1);
  task_outcome a = run_task(sys, with, reviewer, caf::actor{});
  REQUIRE(a.success);
  auto plans_with = f.trajectory();
  fixture g("ltm-off");
  g.script.generator = 1;
  auto gpu2 = sys.spawn(scripted_gpu, g.nvrtc, g.reviews);
  auto reviewer2 = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu2});
  auto without = g.options(1, 1);
  without.use_long_term_memory = false;
  task_outcome b = run_task(sys, without, reviewer2, caf::actor{});
  REQUIRE(b.success);
  // With the decision table, a streaming memory-bound kernel gets the table's method;
  // without it every applicable method ties and the first by id wins. They differ, and
  // no experience is recorded in the ablation.
  REQUIRE(f.script.methods_asked.size() == 1);
  REQUIRE(g.script.methods_asked.size() == 1);
  CHECK(f.script.methods_asked[0] != g.script.methods_asked[0]);
  auto exp = g.memory->read_experience();
  REQUIRE(exp.ok());
  CHECK(exp->empty());
  for (auto h : {reviewer, reviewer2}) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  for (auto h : {gpu, gpu2}) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
}

TEST_CASE("a crashed agent is restarted and its request re-sent", "[agents][supervision]") {
  fixture f("crash");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});
  auto o = f.options(1, 2);
  o.backend = std::make_shared<crashing_coder>(f.model, 2);
  task_outcome out = run_task(sys, o, reviewer, caf::actor{});
  INFO(out.reason);
  REQUIRE(out.success);
  CHECK(out.agent_restarts == 2);
  CHECK(out.rounds == 2);
  CHECK(out.best.origin.rfind("optimize:", 0) == 0);
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
}

TEST_CASE("an agent that keeps crashing ends its task, and the other tasks go on, the "
          "output directory has every task's results",
          "[agents][supervision][report]") {
  fixture f("experiment");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});

  experiment_options eo;
  eo.name = "loop-test";
  task_spec good = f.task, doomed = f.task, third = f.task;
  good.name = "relu_a";
  doomed.name = "relu_doomed";
  third.name = "relu_c";
  eo.tasks = {good, doomed, third};
  eo.tasks_in_flight = 2;
  eo.output_dir = (f.dir / "out").string();
  eo.base = f.options(1, 1);
  std::vector<task_progress> seen;
  eo.on_progress = [&](const task_progress& p) { seen.push_back(p); };
  // One backend for all tasks: it crashes on the doomed task only.
  class selective final : public coder {
   public:
    explicit selective(std::shared_ptr<coder> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return "llm"; }
    result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override {
      return inner_->seeds(t, n);
    }
    result<candidate> optimize(const optimize_input& in) override {
      if (in.task.name == "relu_doomed") throw std::runtime_error("always crashes");
      return inner_->optimize(in);
    }
    result<candidate> repair(const repair_input& in) override { return inner_->repair(in); }
   private:
    std::shared_ptr<coder> inner_;
  };
  eo.base.backend = std::make_shared<selective>(f.model);
  f.script.generator = 100;  // every seed good (the counter is shared by the tasks)
  run_summary s = run_experiment(sys, eo, reviewer);
  REQUIRE(s.outcomes.size() == 3);
  CHECK(s.pending.empty());
  for (const auto& o : s.outcomes) {
    INFO(o.task << ": " << o.reason);
    // The doomed task still has its correct seed: success, but its line ended early.
    CHECK(o.success);
    if (o.task == "relu_doomed") {
      CHECK_THAT(o.reason, Contains("giving up"));
      CHECK(o.agent_restarts == 3);
      CHECK(o.rounds == 1);
    } else {
      CHECK(o.agent_restarts == 0);
      CHECK(o.best.origin.rfind("optimize:", 0) == 0);
    }
  }
  // Progress was reported for every task, ending in done.
  std::set<std::string> done;
  for (const auto& p : seen)
    if (p.state == "done") done.insert(p.task);
  CHECK(done.size() == 3);
  // The output directory.
  fs::path out = f.dir / "out";
  CHECK(fs::exists(out / "summary.md"));
  std::ifstream sj(out / "summary.json");
  json summary = json::parse(sj);
  CHECK(summary["schema"] == "ks.run_summary/1");
  CHECK(summary["tasks"].size() == 3);
  CHECK(summary["geomean_speedup"].get<double>() > 1.0);
  for (const char* t : {"relu_a", "relu_doomed", "relu_c"}) {
    INFO(t);
    CHECK(fs::exists(out / "tasks" / t / "kernel.cu"));
    CHECK(fs::exists(out / "tasks" / t / "plan.yaml"));
    CHECK(fs::exists(out / "tasks" / t / "review.json"));
    CHECK(fs::exists(out / "tasks" / t / "outcome.json"));
    std::ifstream tr(out / "tasks" / t / "trajectory.txt");
    std::string text((std::istreambuf_iterator<char>(tr)), {});
    CHECK_THAT(text, Contains(std::string("trajectory of ") + t));
  }
  std::ifstream md(out / "summary.md");
  std::string text((std::istreambuf_iterator<char>(md)), {});
  CHECK_THAT(text, Contains("| relu_doomed | yes |"));
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
}
