// The optimisation loop end to end, without a GPU: real agents (CAF actors), the real
// llm coder talking HTTP to a scripted LLM server on loopback, the real decision
// policy and skill library, a real RocksDB store, real NVRTC compiles. The one part
// that cannot run here is the GPU: `scripted_gpu` stands in for the GPU pool. It
// compiles each candidate with NVRTC (compile errors are real) and then gives the
// verdict the kernel's `// verdict:` comment asks for, with the timing and profile a
// memory-bound elementwise kernel shows, and the same phase times for every review
// (kScriptedPhases). The same loop runs against the real worker on
// the GPU machine (docs/agent-loop.md).

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/agents.hpp"
#include "actors/experiment_runner.hpp"
#include "actors/task_coordinator.hpp"
#include "base/number_format.hpp"
#include "coder/llm_coder.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/task_queue.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "llm/llm_client.hpp"
#include "model/candidate_id.hpp"
#include "model/json_codec.hpp"
#include "policy/skill_library.hpp"
#include "report/run_report.hpp"
#include "report/trajectory_timeline.hpp"
#include "store/store.hpp"
#include "task/task_loader.hpp"
#include "tests/support/llm_fake_server.hpp"

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

// The phase times the GPU stand-in gives every review: binary fractions, so that sums
// of them are exact and a test can compare them with ==.
const review_phases kScriptedPhases{0.125, 0.25, 0.5, 1.0, 2.0, 4.0};

// The phase times of n reviews of the stand-in.
review_phases scripted_phases(uint32_t n) {
  const review_phases& p = kScriptedPhases;
  return {p.compile_s * n, p.inputs_s * n, p.reference_s * n, p.verify_s * n, p.timing_s * n, p.profile_s * n};
}

// The GPU stand-in (see the top of the file).
gpu_pool_actor::behavior_type scripted_gpu(gpu_pool_actor::pointer self, std::shared_ptr<nvrtc_compiler> nvrtc,
                                           std::shared_ptr<std::atomic<int>> reviews,
                                           std::shared_ptr<std::atomic<int>> profiled) {
  return {[](describe_atom) {
            worker_info w;
            w.host = "scripted";
            return w;
          },
          [=](const review_request& req) -> review_result {
            ++*reviews;
            if (req.options.profile) ++*profiled;
            review_result r;
            r.request_id = req.request_id;
            r.candidate_id = req.cand.id;
            r.device = "scripted/0";
            r.phases = kScriptedPhases;
            auto c = nvrtc->compile(req.cand.source, req.cand.compile_options);
            if (!c || !c->ok) {
              r.status = review_status::compile_error;
              r.message = c ? "compile failed" : c.message();
              if (c) r.diagnostics = c->diagnostics, r.compile_log = c->log;
              return r;
            }
            r.resources = c->resources;
            std::smatch m;
            std::regex re("// verdict: (\\w+)(?: speedup=([0-9.]+))?(?: flag=(\\w+))?(?: delay=([0-9]+))?");
            std::string verdict = "incorrect";
            double speedup = 1.0;
            if (std::regex_search(req.cand.source, m, re)) {
              verdict = m[1];
              if (m[2].matched) speedup = std::stod(m[2]);
              // A review that takes its time (another line meanwhile reaches the kernel).
              if (m[4].matched) std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(m[4])));
            }
            r.trials_run = req.options.trials;
            if (verdict == "ok") {
              r.status = review_status::ok;
              r.trials_passed = r.trials_run;
              r.reference_time.median_ms = 1.0;
              r.candidate_time.median_ms = 1.0 / speedup;
              r.speedup = speedup;
              r.profile.values = {{"dram_throughput_pct", 72.5},    {"l2_throughput_pct", 40.1},
                                  {"l1_throughput_pct", 35.0},      {"sm_throughput_pct", 18.2},
                                  {"achieved_occupancy_pct", 81.0}, {"stall_long_scoreboard_pct", 55.0},
                                  {"branch_efficiency_pct", 100}};
              r.profile.kernel_launches = 1;
              r.message = "correct in every trial";
              if (m[3].matched) r.flags.push_back(m[3]);
            } else if (verdict == "internal") {
              r.status = review_status::internal_error;
              r.message = "the GPU worker lost its device";
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
  // Each repairer call's verdict by call number (default: ok, 1.1x).
  std::function<std::string(int call)> repair_verdict;
};

// The optimizer's method: from its knowledge section's title, or, without long-term
// memory, from the section that names it only.
std::string method_in(const std::string& user) {
  std::smatch m;
  std::regex re("## Method(?: to apply: [^\\n]*\\(|: )`([a-z0-9_]+)`");
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
    return openai_ok(
        "```json\n{\"diagnosis\": \"the seed skips the last element\", "
        "\"actions\": [\"fix the bound check\"]}\n```\n");
  }
  if (system.find("You are the repairer") != std::string::npos) {
    int n = ++s.repairer;
    std::string verdict = s.repair_verdict ? s.repair_verdict(n) : "ok speedup=1.1";
    return openai_ok(candidate_reply(kernel(verdict, "repair-" + std::to_string(n))));
  }
  if (system.find("You are the optimizer") != std::string::npos) {
    int n = ++s.optimizer;
    std::string method = method_in(user);
    s.methods_asked.push_back(method);
    std::string verdict =
        s.optimize_verdict ? s.optimize_verdict(n, method) : "ok speedup=" + std::to_string(1.1 + 0.3 * n);
    return openai_ok(candidate_reply(kernel(verdict, "opt-" + std::to_string(n) + "-" + method)));
  }
  int n = ++s.generator;
  // The first seed is wrong (the loop must diagnose and repair it); others are fine.
  return openai_ok(candidate_reply(kernel(n == 1 ? "incorrect" : "ok speedup=1.0", "seed-" + std::to_string(n))));
}

// A coder that crashes (throws) on its first `crashes` optimize calls: a real actor
// crash for the supervision tests.
class crashing_coder final : public coder {
 public:
  crashing_coder(std::shared_ptr<coder> inner, int crashes) : inner_(std::move(inner)), left_(crashes) {}
  std::string name() const override { return inner_->name(); }
  result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override { return inner_->seeds(t, n); }
  result<candidate> optimize(const optimize_input& in) override {
    if (left_-- > 0) throw std::runtime_error("optimizer crashed on purpose");
    return inner_->optimize(in);
  }
  result<candidate> repair(const repair_input& in) override { return inner_->repair(in); }

 private:
  std::shared_ptr<coder> inner_;
  std::atomic<int> left_;
};

// A coder whose optimize and repair answers a test may take over: a hook that returns
// a result answers instead of the inner coder, one that returns nullopt lets it answer.
class scripted_coder final : public coder {
 public:
  using optimize_hook = std::function<std::optional<result<candidate>>(const optimize_input&)>;
  using repair_hook = std::function<std::optional<result<candidate>>(const repair_input&)>;
  scripted_coder(std::shared_ptr<coder> inner, optimize_hook on_optimize, repair_hook on_repair)
      : inner_(std::move(inner)), on_optimize_(std::move(on_optimize)), on_repair_(std::move(on_repair)) {}
  std::string name() const override { return inner_->name(); }
  result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override { return inner_->seeds(t, n); }
  result<candidate> optimize(const optimize_input& in) override {
    if (on_optimize_)
      if (auto r = on_optimize_(in)) return std::move(*r);
    return inner_->optimize(in);
  }
  result<candidate> repair(const repair_input& in) override {
    if (on_repair_)
      if (auto r = on_repair_(in)) return std::move(*r);
    return inner_->repair(in);
  }

 private:
  std::shared_ptr<coder> inner_;
  optimize_hook on_optimize_;
  repair_hook on_repair_;
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
  std::shared_ptr<std::atomic<int>> profiled = std::make_shared<std::atomic<int>>(0);  // reviews asked to profile
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

// The kinds of a trajectory's entries in order, joined by spaces: the path a line took.
std::string kinds(const std::vector<trajectory_entry>& t) {
  std::string out;
  for (const auto& e : t) out += (out.empty() ? "" : " ") + e.kind;
  return out;
}

std::vector<trajectory_entry> of_kind(const std::vector<trajectory_entry>& t, const std::string& kind) {
  std::vector<trajectory_entry> out;
  for (const auto& e : t)
    if (e.kind == kind) out.push_back(e);
  return out;
}

std::string short_id(const std::string& id) { return id.substr(0, 12); }

// run_task with the progress it reports, in order.
struct watched_run {
  task_outcome out;
  std::vector<task_progress> progress;
  // The states reported, joined by spaces.
  std::string states() const {
    std::string s;
    for (const auto& p : progress) s += (s.empty() ? "" : " ") + p.state;
    return s;
  }
};

watched_run run_watched(caf::actor_system& sys, const coordinator_options& o, const reviewer_actor& reviewer) {
  caf::scoped_actor sink{sys};
  watched_run w;
  w.out = run_task(sys, o, reviewer, caf::actor{sink});
  // run_task sent everything before it returned: it is all in the mailbox.
  for (bool more = true; more;)
    sink->receive([&](task_progress& p) { w.progress.push_back(std::move(p)); },
                  caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
  return w;
}

// The scripted GPU and a reviewer in front of it, shut down with the test.
struct scripted_review {
  gpu_pool_actor gpu;
  reviewer_actor reviewer;
  scripted_review(caf::actor_system& s, fixture& f)
      : gpu(s.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled)),
        reviewer(s.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu})) {}
  ~scripted_review() {
    caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
  }
};

// The line checkpoint of the task's first line, as the store holds it.
json line_checkpoint_record(fixture& f) {
  auto rec = f.memory->get_task_record(checkpoint_prefix(f.task.name) + "line/0");
  REQUIRE(rec.ok());
  REQUIRE(rec->has_value());
  return **rec;
}

}  // namespace

TEST_CASE("a failing seed is diagnosed and repaired, then optimised round by round", "[agents][loop]") {
  fixture f("repair");
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled);
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

// The profile feeds the planner's next round (and experience's metric changes): a task
// run with no rounds (a bench's SEEDS=N ROUNDS=0) asks none, which was two thirds of the
// review time of level 3's networks on the H100 (214 of 312 s).
TEST_CASE("reviews are profiled only where a round follows", "[agents][loop]") {
  for (uint32_t rounds : {0u, 1u}) {
    INFO(rounds << " rounds");
    fixture f("profile" + std::to_string(rounds));
    test_system_config cfg;
    caf::actor_system sys{cfg};
    scripted_review s(sys, f);
    task_outcome out = run_task(sys, f.options(1, rounds), s.reviewer, caf::actor{});
    INFO(out.reason);
    REQUIRE(out.success);
    if (rounds == 0) {
      CHECK(*f.reviews == 2);  // the seed (incorrect), its repair
      CHECK(*f.profiled == 0);
    } else {
      CHECK(*f.reviews == 3);  // and the round's optimisation
      CHECK(*f.profiled == 3);
    }
  }
}

TEST_CASE("a method that failed is not tried again in the same situation", "[agents][loop]") {
  fixture f("nogain");
  // Every optimisation is wrong: each round's method must differ from the last ones.
  f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled);
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
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled);
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
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled);
  auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});
  auto with = f.options(1, 1);
  task_outcome a = run_task(sys, with, reviewer, caf::actor{});
  REQUIRE(a.success);
  auto plans_with = f.trajectory();
  fixture g("ltm-off");
  g.script.generator = 1;
  auto gpu2 = sys.spawn(scripted_gpu, g.nvrtc, g.reviews, g.profiled);
  auto reviewer2 = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu2});
  auto without = g.options(1, 1);
  without.use_long_term_memory = false;
  task_outcome b = run_task(sys, without, reviewer2, caf::actor{});
  REQUIRE(b.success);
  // With the decision table, a streaming memory-bound kernel gets the table's method;
  // without it every applicable method is drawn in a uniform order (from a fixed seed,
  // the candidate and the round: the same draw every run). They differ, and no
  // experience is recorded in the ablation.
  REQUIRE(f.script.methods_asked.size() == 1);
  REQUIRE(g.script.methods_asked.size() == 1);
  CHECK(f.script.methods_asked[0] != g.script.methods_asked[0]);
  auto exp = g.memory->read_experience();
  REQUIRE(exp.ok());
  CHECK(exp->empty());
  for (auto h : {reviewer, reviewer2}) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  for (auto h : {gpu, gpu2}) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
}

// The skill library's prose: what a model learns from the long-term memory. Ids and
// expressions are left out (the planner's decision names a method by its id either way);
// strings shorter than 12 characters could match ordinary words by chance.
std::vector<std::string> library_prose(const skill_library& lib) {
  std::vector<std::string> all;
  auto add = [&](const std::string& s) {
    if (s.size() >= 12) all.push_back(s);
  };
  for (const auto& m : lib.methods) {
    add(m.name);
    add(m.rationale);
    for (const auto& p : m.preconditions) add(p);
    for (const auto& p : m.forbidden_patterns) add(p);
    add(m.example);
  }
  for (const auto& b : lib.bottlenecks) add(b.description);
  for (const auto& c : lib.decisions) {
    add(c.description);
    for (const auto& a : c.allow) add(a.why);
    for (const auto& f : c.forbid) add(f.why);
  }
  for (const auto& v : lib.vetoes) add(v.why);
  return all;
}

// The ablation without long-term memory takes the skill library's knowledge out of the
// llm coder's prompts too, as the paper's ablation does: the coder is made from a config
// the way `kernelskill run` makes it (llm_coder_options_for), the loop runs, and the
// optimizer's prompt that went over HTTP (built by the real prompt builder) carries none
// of the library's prose; with the memory on it carries the chosen method's rationale,
// preconditions and example.
TEST_CASE("without long-term memory the optimizer's prompt carries no skill knowledge", "[agents][ablation]") {
  for (bool ltm : {true, false}) {
    INFO((ltm ? "long-term memory on" : "long-term memory off"));
    fixture f(ltm ? "prompt-ltm" : "prompt-no-ltm");
    auto cfg = parse_config(ltm ? "name: full\n" : "ablation: {long_term_memory: false}\n", "ablation.yaml", f.dir);
    REQUIRE(cfg.ok());
    f.model = std::make_shared<llm_coder>(llm_coder_options_for(*cfg, chat_with(*f.client), f.library));
    f.script.generator = 1;  // the seed is correct: straight to the optimizer
    test_system_config sc;
    caf::actor_system sys{sc};
    scripted_review rv(sys, f);
    auto o = f.options(1, 1);
    o.use_long_term_memory = cfg->ablation.long_term_memory;
    task_outcome out = run_task(sys, o, rv.reviewer, caf::actor{});
    REQUIRE(out.success);
    std::vector<std::string> prompts;
    for (const auto& r : f.server.requests()) {
      json body = r.body_json();
      if (std::string(body["messages"][0]["content"]).find("You are the optimizer") != std::string::npos)
        prompts.push_back(body["messages"].back()["content"]);
    }
    REQUIRE(prompts.size() == 1);
    REQUIRE(f.script.methods_asked.size() == 1);
    const method_def* m = f.library->find_method(f.script.methods_asked[0]);
    REQUIRE(m != nullptr);
    const std::string& prompt = prompts[0];
    if (ltm) {
      CHECK_THAT(prompt, Contains(m->rationale));
      CHECK_THAT(prompt, Contains(m->example));
      for (const auto& p : m->preconditions) CHECK_THAT(prompt, Contains(p));
    } else {
      CHECK_THAT(prompt, Contains("## Method: `" + m->id + "`"));
      std::vector<std::string> found;
      const auto prose = library_prose(*f.library);
      REQUIRE(prose.size() > 100);  // the whole library is looked for, not a sample
      for (const auto& text : prose)
        if (prompt.find(text) != std::string::npos) found.push_back(text);
      CHECK(found.empty());
    }
  }
}

TEST_CASE("a crashed agent is restarted and its request re-sent", "[agents][supervision]") {
  fixture f("crash");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled);
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

TEST_CASE(
    "an agent that keeps crashing ends its task, and the other tasks go on, the "
    "output directory has every task's results",
    "[agents][supervision][report]") {
  fixture f("experiment");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  auto gpu = sys.spawn(scripted_gpu, f.nvrtc, f.reviews, f.profiled);
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
  eo.devices = 1;  // one scripted GPU
  eo.base = f.options(1, 1);
  std::vector<task_progress> seen;
  eo.on_progress = [&](const task_progress& p) { seen.push_back(p); };
  // One backend for all tasks: it crashes on the doomed task only.
  class selective final : public coder {
   public:
    explicit selective(std::shared_ptr<coder> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return "llm"; }
    result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override { return inner_->seeds(t, n); }
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
  // The reviews' phase times: per task, the sum over its reviews; in all, the sum over
  // every review the GPU ran (each took kScriptedPhases).
  uint32_t reviews = 0;
  for (const auto& o : s.outcomes) {
    INFO(o.task);
    CHECK(o.reviews > 0);
    CHECK(o.review_time == scripted_phases(o.reviews));
    reviews += o.reviews;
  }
  CHECK(reviews == static_cast<uint32_t>(f.reviews->load()));
  const review_phases all = scripted_phases(reviews);
  CHECK(total_review_time(s.outcomes) == all);
  CHECK(summary["review_phases"]["profile_s"].get<double>() == all.profile_s);
  CHECK(summary["review_phases"]["compile_s"].get<double>() == all.compile_s);
  CHECK(summary["review_phases"]["total_s"].get<double>() == 7.875 * reviews);
  CHECK(summary["tasks"][0]["review_phases"]["verify_s"].get<double>() == s.outcomes[0].reviews * 1.0);
  std::ifstream md(out / "summary.md");
  std::string text((std::istreambuf_iterator<char>(md)), {});
  CHECK_THAT(text, Contains("| relu_doomed | yes |"));
  CHECK_THAT(text, Contains("Review time: " + format_double("%.1f s", 7.875 * reviews) + " over " +
                            std::to_string(reviews) + " reviews (" + describe_phases(all) + ")."));
  // Throughput: the finished tasks over the wall time; busy = review time over the
  // devices' wall time (the scripted phases are not wall time, so only the arithmetic).
  REQUIRE(s.wall_s > 0);
  CHECK(tasks_per_hour(s) == Approx(3 * 3600.0 / s.wall_s));
  CHECK(summary["tasks_per_hour"].get<double>() > 0);
  CHECK(summary["devices"] == eo.devices);
  CHECK_THAT(text, Contains(" tasks per hour; the reviews of finished tasks kept 1 device busy "));
  run_summary two = s;
  two.devices = 2;
  CHECK(device_busy_fraction(two) == Approx(7.875 * reviews / (s.wall_s * 2)));
  two.devices = 0;
  CHECK(device_busy_fraction(two) == 0);
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
}

// ---------------------------------------------------------------------------
// The seed line's states one by one: which path a line takes from each, what it
// writes on the way, and why it ends.

TEST_CASE("a line goes review, diagnose, repair, then plan, optimize and review each round", "[agents][line]") {
  fixture f("path");
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  watched_run w = run_watched(sys, f.options(1, 2), rv.reviewer);
  INFO(w.out.reason);
  REQUIRE(w.out.success);
  CHECK(w.out.reason == "best speedup 1.70 (round budget spent)");
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review diagnose repair review plan optimize review plan optimize review note");
  // Rounds: the seed, its diagnosis and repair belong to round 0; each plan opens a round.
  std::vector<uint32_t> rounds;
  for (const auto& e : t) rounds.push_back(e.round);
  CHECK(rounds == std::vector<uint32_t>{0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 0});
  auto reviews = of_kind(t, "review");
  CHECK(reviews[0].status == review_status::incorrect);
  CHECK(reviews[0].summary == "origin seed:llm-1: incorrect: output y differs from the reference at 1024 elements");
  CHECK(reviews[0].metrics.empty());
  CHECK(reviews[1].summary == "origin repair: ok, speedup 1.10: correct in every trial");
  CHECK(reviews[1].metrics.at("candidate_ms") == Approx(1.0 / 1.1));
  CHECK(reviews[1].metrics.at("reference_ms") == Approx(1.0));
  CHECK(reviews[1].metrics.at("dram_throughput_pct") == Approx(72.5));
  CHECK(reviews[1].phases == kScriptedPhases);
  CHECK_THAT(render_trajectory(f.task.name, t), Contains("        review time " + format_double("%.2f", 7.875) +
                                                         " s: " + describe_phases(kScriptedPhases) + "\n"));
  CHECK_THAT(reviews[2].summary, Contains("[bottleneck="));
  CHECK_THAT(reviews[2].summary, Contains(": ok, speedup 1.40: correct in every trial"));
  CHECK(reviews[2].speedup == Approx(1.4));
  auto repair = of_kind(t, "repair").at(0);
  CHECK(repair.summary ==
        "repair 1 of " + short_id(reviews[0].candidate_id) + " → " + short_id(reviews[1].candidate_id));
  auto diagnose = of_kind(t, "diagnose").at(0);
  CHECK_THAT(diagnose.summary, Contains("the seed skips the last element | fix the bound check"));
  auto optimize = of_kind(t, "optimize");
  CHECK_THAT(optimize[0].summary,
             Contains(" on " + short_id(reviews[1].candidate_id) + " → " + short_id(reviews[2].candidate_id)));
  CHECK(t.back().summary == "done: best speedup 1.70 (round budget spent)");
  // Progress: the task's states in order, ending in done.
  CHECK(w.states() ==
        "generating reviewing repairing reviewing optimizing planning optimizing reviewing "
        "optimizing planning optimizing reviewing optimizing done");
  // Two correct optimisations: two experience records, each with its gain.
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  REQUIRE(exp->size() == 2);
  CHECK((*exp)[0].speedup_before == Approx(1.1));
  CHECK((*exp)[0].speedup_after == Approx(1.4));
  CHECK_FALSE((*exp)[0].structure_class.empty());
}

TEST_CASE("an attempt its repairs cannot fix sends the line back to its best version", "[agents][line]") {
  fixture f("repairs-spent");
  f.script.generator = 1;  // a good seed
  f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
  f.script.repair_verdict = [](int) { return "incorrect"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 1);
  o.repair_attempts = 1;
  watched_run w = run_watched(sys, o, rv.reviewer);
  INFO(w.out.reason);
  REQUIRE(w.out.success);
  CHECK(w.out.reason == "best speedup 1.00 (round budget spent)");
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review plan optimize review diagnose repair review note note");
  auto reviews = of_kind(t, "review");
  CHECK(t[8].summary == "back to " + short_id(reviews[0].candidate_id) + ": 1 repairs did not make " +
                            short_id(reviews[2].candidate_id) + " pass");
  CHECK(t[8].candidate_id == reviews[0].candidate_id);
  CHECK(t[8].parent_id == reviews[2].candidate_id);
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  REQUIRE(exp->size() == 1);
  CHECK_FALSE((*exp)[0].correct);
  CHECK((*exp)[0].structure_class.empty());
}

TEST_CASE("a seed its repairs cannot fix ends the line without a kernel", "[agents][line]") {
  fixture f("seed-unfixable");
  f.script.repair_verdict = [](int) { return "incorrect"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  watched_run w = run_watched(sys, f.options(1, 3), rv.reviewer);
  CHECK_FALSE(w.out.success);
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review diagnose repair review diagnose repair review note");
  auto reviews = of_kind(t, "review");
  CHECK(w.out.reason == "no correct kernel: 2 repairs did not make " + short_id(reviews[2].candidate_id) + " pass");
  CHECK(w.out.rounds == 0);
  CHECK(w.out.reviews == 3);
  CHECK(t.back().status == review_status::internal_error);  // no kernel: the outcome's empty review
  CHECK(t.back().summary == "failed: " + w.out.reason);
  CHECK(w.states() == "generating reviewing repairing reviewing repairing reviewing failed");
}

TEST_CASE(
    "a repairer that cannot fix the seed ends the line, one that cannot fix an attempt "
    "sends it back",
    "[agents][line]") {
  auto cannot = [](const repair_input&) -> std::optional<result<candidate>> {
    return result<candidate>(error{"nothing to fix here"});
  };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  {
    fixture f("repairer-fails-seed");
    scripted_review rv(sys, f);
    auto o = f.options(1, 2);
    o.backend = std::make_shared<scripted_coder>(f.model, nullptr, cannot);
    watched_run w = run_watched(sys, o, rv.reviewer);
    CHECK_FALSE(w.out.success);
    CHECK(w.out.reason == "no correct kernel: the repairer could not fix the seed: nothing to fix here");
    auto t = f.trajectory();
    CHECK(kinds(t) == "seed review diagnose repair note");
    CHECK(t[3].summary == "repair failed: nothing to fix here");
    CHECK(t[3].method == "repair");
  }
  {
    fixture f("repairer-fails-attempt");
    f.script.generator = 1;
    f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
    scripted_review rv(sys, f);
    auto o = f.options(1, 1);
    o.backend = std::make_shared<scripted_coder>(f.model, nullptr, cannot);
    watched_run w = run_watched(sys, o, rv.reviewer);
    REQUIRE(w.out.success);
    auto t = f.trajectory();
    CHECK(kinds(t) == "seed review plan optimize review diagnose repair note note");
    auto reviews = of_kind(t, "review");
    CHECK(t[7].summary == "back to " + short_id(reviews[0].candidate_id) + ": the repairer could not fix " +
                              short_id(reviews[1].candidate_id) + ": nothing to fix here");
    // The failed repair is not an experience of the method; reverting records none.
    auto exp = f.memory->read_experience();
    REQUIRE(exp.ok());
    CHECK(exp->empty());
  }
}

TEST_CASE("a repairer that goes back to the best version makes the attempt a failure", "[agents][line]") {
  fixture f("repairer-goes-back");
  f.script.generator = 1;
  f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 1);
  o.backend = std::make_shared<scripted_coder>(f.model, nullptr,
                                               [](const repair_input& in) -> std::optional<result<candidate>> {
                                                 REQUIRE(in.last_good);
                                                 return result<candidate>(*in.last_good);
                                               });
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review plan optimize review diagnose note note");
  auto reviews = of_kind(t, "review");
  CHECK(t[6].summary == "back to " + short_id(reviews[0].candidate_id) + ": the repairer went back to " +
                            short_id(reviews[0].candidate_id));
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  REQUIRE(exp->size() == 1);
  CHECK_FALSE((*exp)[0].correct);
  CHECK(w.out.reviews == 2);
}

// A coder whose every method gives back the same slower kernel.
std::shared_ptr<coder> same_slower_kernel(fixture& f) {
  return std::make_shared<scripted_coder>(
      f.model,
      [](const optimize_input& in) -> std::optional<result<candidate>> {
        candidate c;
        c.task = in.task.name;
        c.source = kernel("ok speedup=0.5", "the same slower one");
        c.plan = in.base.plan;
        c.origin = "optimize:" + in.plan.chosen;
        c.parent_id = in.base.id;
        c.id = candidate_id(c);
        return result<candidate>(std::move(c));
      },
      nullptr);
}

// Without short-term memory the planner offers the move that failed again, and the
// coder gives back the kernel it gave: the line reuses that kernel's verdict (no second
// review) and the experience counts the attempt once.
TEST_CASE("a slower attempt sends the line back, and a kernel seen before is not reviewed again", "[agents][line]") {
  fixture f("slower");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 2);
  o.use_short_term_memory = false;
  o.backend = same_slower_kernel(f);
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  CHECK(w.out.reason == "best speedup 1.00 (round budget spent)");
  CHECK(w.out.best.origin.rfind("seed:", 0) == 0);
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review plan optimize review note plan optimize review note note");
  CHECK(t[5].summary == "back to " + short_id(t[1].candidate_id) + ": speedup 0.50 is not better than 1.00");
  // The second review of the same kernel is the first one's verdict, not a GPU run.
  CHECK(t[4].candidate_id == t[8].candidate_id);
  CHECK(t[8].status == review_status::ok);
  CHECK(t[8].speedup == Approx(0.5));
  CHECK(*f.reviews == 2);
  CHECK(w.out.reviews == 2);
  // The same move twice (no short-term memory): one measurement in the experience.
  CHECK(t[3].method == t[7].method);
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  REQUIRE(exp->size() == 1);
  CHECK((*exp)[0].correct);
  CHECK((*exp)[0].speedup_after == Approx(0.5));
}

// With short-term memory a move whose kernel the task has reviewed is not reviewed nor
// counted as a round: it is recorded as not applied and the next ranked move is tried,
// until none is left.
TEST_CASE("a move that gives back a kernel the task reviewed is skipped for the next", "[agents][line]") {
  fixture f("seen");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 4);
  o.backend = same_slower_kernel(f);
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  auto t = f.trajectory();
  INFO(kinds(t));
  // One review of the slower kernel; every later move gave it back and was skipped.
  CHECK(*f.reviews == 2);
  CHECK(count_kind(t, "review") == 2);
  const auto optimizes = of_kind(t, "optimize");
  REQUIRE(optimizes.size() >= 3);
  std::set<std::string> methods;
  for (size_t i = 1; i < optimizes.size(); ++i) {
    CHECK_THAT(optimizes[i].summary, Contains("not applied: it gives back " + short_id(optimizes[0].candidate_id) +
                                              ", a kernel the task reviewed before"));
    methods.insert(optimizes[i].method);
  }
  CHECK(methods.size() == optimizes.size() - 1);  // each skipped move once
  CHECK(methods.count(optimizes[0].method) == 0);
  CHECK(w.out.rounds == 2);
  CHECK_THAT(w.out.reason, Contains("no allowed method could be applied"));
}

// Two lines that reach the same kernel (short-term memory on): it is reviewed once for
// the task. Here every move gives back one kernel whose review takes 0.3 s: the line
// that makes it second finds the other reviewing it and tries its next moves instead.
TEST_CASE("a move that gives back a kernel another line is reviewing is skipped, not reviewed twice",
          "[agents][line][stm]") {
  fixture f("shared-move");
  f.script.generator = 1;  // both seeds correct
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(2, 1);
  o.backend = std::make_shared<scripted_coder>(
      f.model,
      [](const optimize_input& in) -> std::optional<result<candidate>> {
        candidate c;
        c.task = in.task.name;
        c.source = kernel("ok speedup=2.0 delay=300", "the one both lines reach");
        c.plan = in.base.plan;
        c.origin = "optimize:" + in.plan.chosen;
        c.parent_id = in.base.id;
        c.id = candidate_id(c);
        return result<candidate>(std::move(c));
      },
      nullptr);
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  CHECK(w.out.best_review.speedup == Approx(2.0));
  auto t = f.trajectory();
  INFO(kinds(t));
  // The two seeds and the shared kernel, once.
  CHECK(*f.reviews == 3);
  CHECK(count_kind(t, "review") == 3);
  bool skipped = false;
  for (const auto& e : of_kind(t, "optimize"))
    skipped = skipped || e.summary.find("a kernel another line of the task is reviewing") != std::string::npos ||
              e.summary.find("a kernel the task reviewed before") != std::string::npos;
  CHECK(skipped);
  // Without short-term memory each line reviews it.
  fixture g("shared-move-no-stm");
  g.script.generator = 1;
  scripted_review rv2(sys, g);
  auto o2 = o;
  o2.memory = g.memory;
  o2.use_short_term_memory = false;
  o2.task = g.task;
  watched_run w2 = run_watched(sys, o2, rv2.reviewer);
  REQUIRE(w2.out.success);
  CHECK(*g.reviews == 4);
}

// Both seeds fail and both repairs give back the same kernel: the line that repairs
// second waits for the other's review of it and takes its verdict.
TEST_CASE("a kernel another line is reviewing is not reviewed again: its verdict is waited for",
          "[agents][line][stm]") {
  fixture f("shared-repair");
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  class failing_seeds final : public coder {
   public:
    explicit failing_seeds(std::shared_ptr<coder> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return inner_->name(); }
    result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override {
      auto s = inner_->seeds(t, n);
      if (!s) return s;
      for (size_t i = 0; i < s->size(); ++i) {
        (*s)[i].source = kernel("incorrect", "failing seed " + std::to_string(i));
        (*s)[i].id = candidate_id((*s)[i]);
      }
      return s;
    }
    result<candidate> optimize(const optimize_input& in) override { return inner_->optimize(in); }
    result<candidate> repair(const repair_input& in) override {
      candidate c = in.failed;
      c.source = kernel("ok speedup=1.5 delay=300", "the repair both lines make");
      c.origin = "repair:fix";
      c.parent_id = in.failed.id;
      c.id = candidate_id(c);
      return c;
    }

   private:
    std::shared_ptr<coder> inner_;
  };
  auto o = f.options(2, 0);
  o.backend = std::make_shared<failing_seeds>(f.model);
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  CHECK(w.out.best_review.speedup == Approx(1.5));
  auto t = f.trajectory();
  INFO(kinds(t));
  // Two failing seeds, then the repaired kernel reviewed once: the second line's entry
  // is the first's verdict, with no review time.
  CHECK(*f.reviews == 3);
  const auto reviews = of_kind(t, "review");
  REQUIRE(reviews.size() == 4);
  CHECK(reviews[2].candidate_id == reviews[3].candidate_id);
  CHECK(reviews[2].status == review_status::ok);
  CHECK(reviews[3].status == review_status::ok);
  CHECK((reviews[2].phases == review_phases{} || reviews[3].phases == review_phases{}));
  CHECK(w.out.reviews == 3);
}

TEST_CASE("a flagged review is never the best kernel: it is repaired like a failure", "[agents][line]") {
  fixture f("flagged");
  f.script.generator = 1;
  f.script.optimize_verdict = [](int, const std::string&) { return "ok speedup=9.0 flag=speedup_above_threshold"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  watched_run w = run_watched(sys, f.options(1, 1), rv.reviewer);
  REQUIRE(w.out.success);
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review plan optimize review diagnose repair review note");
  auto reviews = of_kind(t, "review");
  CHECK_THAT(reviews[1].summary, Contains(": ok, speedup 9.00, flagged: correct in every trial"));
  CHECK(w.out.best.id == reviews[2].candidate_id);
  CHECK(w.out.best.origin == "repair");
  CHECK(w.out.best_review.speedup == Approx(1.1));
  // The repaired kernel carries the method of the attempt it fixed.
  CHECK(reviews[2].method == reviews[1].method);
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  REQUIRE(exp->size() == 1);
  CHECK((*exp)[0].correct);
  CHECK((*exp)[0].speedup_after == Approx(1.1));
}

TEST_CASE("a reviewer that fails ends a line without a kernel and sends one with a kernel back", "[agents][line]") {
  test_system_config cfg;
  caf::actor_system sys{cfg};
  {
    fixture f("reviewer-fails-seed");
    scripted_review rv(sys, f);
    auto o = f.options(1, 2);
    // The seed's review fails: no diagnosis, no repair.
    struct internal_seeds final : coder {
      std::shared_ptr<coder> inner;
      explicit internal_seeds(std::shared_ptr<coder> i) : inner(std::move(i)) {}
      std::string name() const override { return inner->name(); }
      result<std::vector<candidate>> seeds(const task_spec& t, uint32_t n) override {
        auto s = inner->seeds(t, n);
        if (s)
          for (auto& c : *s) {
            c.source = kernel("internal", "seed");
            c.id = candidate_id(c);
          }
        return s;
      }
      result<candidate> optimize(const optimize_input& in) override { return inner->optimize(in); }
      result<candidate> repair(const repair_input& in) override { return inner->repair(in); }
    };
    o.backend = std::make_shared<internal_seeds>(f.model);
    watched_run w = run_watched(sys, o, rv.reviewer);
    CHECK_FALSE(w.out.success);
    CHECK(w.out.reason == "the reviewer failed: the GPU worker lost its device");
    CHECK(kinds(f.trajectory()) == "seed review note");
    CHECK(f.script.repairer == 0);
    CHECK(f.script.diagnoser == 0);
  }
  {
    fixture f("reviewer-fails-attempt");
    f.script.generator = 1;
    f.script.optimize_verdict = [](int, const std::string&) { return "internal"; };
    scripted_review rv(sys, f);
    watched_run w = run_watched(sys, f.options(1, 1), rv.reviewer);
    REQUIRE(w.out.success);
    auto t = f.trajectory();
    CHECK(kinds(t) == "seed review plan optimize review note note");
    CHECK(t[5].summary ==
          "back to " + short_id(t[1].candidate_id) + ": the reviewer failed: the GPU worker lost its device");
    // The reviewer's failure is not the method's: the attempt was never judged, so
    // nothing goes into the experience (issue 19).
    CHECK(t[4].kind == "review");
    CHECK(t[4].status == review_status::internal_error);
    CHECK_FALSE(t[4].method.empty());
    auto exp = f.memory->read_experience();
    REQUIRE(exp.ok());
    CHECK(exp->empty());
  }
}

TEST_CASE("when no ranked method can be applied the line ends, naming those it tried", "[agents][line]") {
  fixture f("not-applied");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 3);
  std::vector<std::string> asked;
  o.backend = std::make_shared<scripted_coder>(
      f.model,
      [&](const optimize_input& in) -> std::optional<result<candidate>> {
        asked.push_back(in.plan.chosen);
        return result<candidate>(error{"method " + in.plan.chosen + " does not apply"});
      },
      nullptr);
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  REQUIRE(asked.size() == 3);
  CHECK(w.out.reason == "best speedup 1.00 (no allowed method could be applied (tried " + asked[0] + ", " + asked[1] +
                            ", " + asked[2] + "))");
  CHECK(w.out.rounds == 1);
  auto t = f.trajectory();
  CHECK(kinds(t) == "seed review plan optimize optimize optimize note");
  for (size_t i = 0; i < 3; ++i) {
    CHECK(t[3 + i].summary == "not applied: method " + asked[i] + " does not apply");
    CHECK(t[3 + i].method == asked[i]);
    CHECK(t[3 + i].candidate_id == t[1].candidate_id);
    CHECK(t[3 + i].parent_id == t[1].candidate_id);
  }
}

TEST_CASE("when every method has failed the line ends with no allowed method left", "[agents][line]") {
  fixture f("no-method-left");
  f.script.generator = 1;
  f.script.optimize_verdict = [](int, const std::string&) { return "incorrect"; };
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 200);
  o.repair_attempts = 0;
  watched_run w = run_watched(sys, o, rv.reviewer);
  REQUIRE(w.out.success);
  CHECK(w.out.reason == "best speedup 1.00 (no allowed method left)");
  auto t = f.trajectory();
  // The last plan found nothing: no optimize follows it.
  REQUIRE(t.size() >= 3);
  CHECK(t[t.size() - 2].kind == "plan");
  CHECK(t[t.size() - 2].method.empty());
  CHECK(w.out.rounds == count_kind(t, "plan"));
  CHECK(f.script.methods_asked.size() == count_kind(t, "plan") - 1);
}

TEST_CASE("a cancelled task stops at its line's next step", "[agents][line][cancel]") {
  test_system_config cfg;
  caf::actor_system sys{cfg};
  {
    fixture f("cancel-before");
    scripted_review rv(sys, f);
    auto o = f.options(1, 3);
    o.cancel = std::make_shared<std::atomic<bool>>(true);
    watched_run w = run_watched(sys, o, rv.reviewer);
    CHECK_FALSE(w.out.success);
    CHECK(w.out.reason == "cancelled");
    CHECK(f.script.generator == 0);
    CHECK(kinds(f.trajectory()) == "note");
  }
  {
    fixture f("cancel-during");
    f.script.generator = 1;
    scripted_review rv(sys, f);
    auto o = f.options(1, 5);
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    o.cancel = cancel;
    o.backend = std::make_shared<scripted_coder>(
        f.model,
        [cancel](const optimize_input&) -> std::optional<result<candidate>> {
          *cancel = true;
          return std::nullopt;
        },
        nullptr);
    watched_run w = run_watched(sys, o, rv.reviewer);
    REQUIRE(w.out.success);
    // The attempt is reviewed, but the line stops before taking it.
    CHECK(w.out.reason == "best speedup 1.00 (cancelled)");
    CHECK(w.out.rounds == 1);
    CHECK(kinds(f.trajectory()) == "seed review plan optimize review note");
    auto cp = line_checkpoint_record(f);
    CHECK(cp["finished"] == true);
    CHECK(cp["reason"] == "cancelled");
  }
}

TEST_CASE("a resumed task neither generates its seeds again nor reruns an ended line", "[agents][line][resume]") {
  fixture f("resume-ended");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 1);
  o.resume = true;  // nothing to resume yet: a fresh start
  watched_run first = run_watched(sys, o, rv.reviewer);
  REQUIRE(first.out.success);
  auto cp = line_checkpoint_record(f);
  CHECK(cp["schema"] == "ks.line_checkpoint/1");
  CHECK(cp["finished"] == true);
  CHECK(cp["round"] == 1);
  CHECK(cp["cur"] == "");
  CHECK(cp["best"] == first.out.best.id);
  size_t requests = f.server.requests().size();
  size_t entries = f.trajectory().size();
  o.rounds = 3;
  watched_run again = run_watched(sys, o, rv.reviewer);
  REQUIRE(again.out.success);
  CHECK(again.out.reason == first.out.reason);
  CHECK(again.out.best.id == first.out.best.id);
  CHECK(again.out.rounds == 1);
  CHECK(again.out.reviews == first.out.reviews);
  CHECK(f.server.requests().size() == requests);
  auto t = f.trajectory();
  CHECK(t.size() == entries + 1);
  CHECK(t.back().summary == "done: " + first.out.reason);
  CHECK(again.states() == "done");
}

TEST_CASE("a line resumes after its last completed round", "[agents][line][resume]") {
  fixture f("resume-round");
  f.script.generator = 1;
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 1);
  watched_run first = run_watched(sys, o, rv.reviewer);
  REQUIRE(first.out.success);
  const std::string key = checkpoint_prefix(f.task.name) + "line/0";
  // As the line stood after round 1's checkpoint, before it ended.
  json round1 = line_checkpoint_record(f);
  round1["finished"] = false;
  round1["reason"] = "";
  round1["cur"] = round1["best"];
  round1["cur_review"] = round1["best_review"];
  REQUIRE(f.memory->put_task_record(key, round1).ok());
  size_t entries = f.trajectory().size();
  int generated = f.script.generator;
  o.rounds = 3;
  o.resume = true;
  watched_run w = run_watched(sys, o, rv.reviewer);
  INFO(w.out.reason);
  REQUIRE(w.out.success);
  CHECK(f.script.generator == generated);
  CHECK(w.out.rounds == 3);
  CHECK(w.out.reviews == 4);  // the seed, round 1's attempt, then rounds 2 and 3
  // The first two reviews' times came back with the checkpoint.
  CHECK(w.out.review_time == scripted_phases(4));
  CHECK(w.out.reason == "best speedup 2.00 (round budget spent)");
  auto all = f.trajectory();
  std::vector<trajectory_entry> t(all.begin() + static_cast<long>(entries), all.end());
  CHECK(kinds(t) == "note plan optimize review plan optimize review note");
  CHECK(t[0].summary == "resumed at round 1 after a restart, from " + short_id(first.out.best.id) + " (best 1.40)");
  CHECK(t[0].round == 1);
  CHECK(t[1].round == 2);
  CHECK(w.states() ==
        "optimizing planning optimizing reviewing optimizing planning optimizing "
        "reviewing optimizing done");
  // The first progress line of the resumed line says so (it went out empty before).
  REQUIRE_FALSE(w.progress.empty());
  CHECK(w.progress.front().detail == t[0].summary);
  // The resumed line's first plan records no experience (no method was being tried).
  auto exp = f.memory->read_experience();
  REQUIRE(exp.ok());
  CHECK(exp->size() == 3);
  // A checkpoint whose kernel is gone: the line ends, saying why.
  round1["cur"] = "0000000000000000";
  REQUIRE(f.memory->put_task_record(key, round1).ok());
  watched_run lost = run_watched(sys, o, rv.reviewer);
  CHECK(lost.out.success);  // its best kernel is still there
  CHECK_THAT(lost.out.reason, Contains("(cannot resume: "));
  // An unreadable checkpoint: the line starts again from its seed.
  REQUIRE(f.memory->put_task_record(key, json{{"schema", "ks.line_checkpoint/1"}}).ok());
  int reviews = *f.reviews;
  entries = f.trajectory().size();
  watched_run fresh = run_watched(sys, o, rv.reviewer);
  REQUIRE(fresh.out.success);
  CHECK(fresh.out.rounds == 3);
  all = f.trajectory();
  t.assign(all.begin() + static_cast<long>(entries), all.end());
  CHECK(kinds(t) == "review plan optimize review plan optimize review plan optimize review note");
  CHECK(*f.reviews == reviews + 4);
}

TEST_CASE("a repairer that keeps crashing ends its line with the reason", "[agents][line][supervision]") {
  fixture f("repairer-crashes");
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 2);
  o.backend =
      std::make_shared<scripted_coder>(f.model, nullptr, [](const repair_input&) -> std::optional<result<candidate>> {
        throw std::runtime_error("the repairer crashed on purpose");
      });
  watched_run w = run_watched(sys, o, rv.reviewer);
  CHECK_FALSE(w.out.success);
  CHECK(w.out.agent_restarts == 3);
  CHECK_THAT(w.out.reason, Contains("the repairer failed again ("));
  CHECK_THAT(w.out.reason, Contains(") after 3 restarts; giving up"));
  CHECK(kinds(f.trajectory()) == "seed review diagnose note");
}

// summary.json and outcome.json are JSON: a speedup or a time JSON has no number for is
// written by name ("Infinity", "NaN"), never as null, and reads back as that number.
TEST_CASE("a run's summary and outcome keep non-finite speedups and times", "[agents][report]") {
  const double inf = std::numeric_limits<double>::infinity();
  task_outcome o;
  o.task = "odd";
  o.success = true;
  o.best_review.speedup = inf;
  o.best_review.candidate_time.median_ms = 1.1754943508222875e-38;
  o.best_review.reference_time.median_ms = std::numeric_limits<double>::quiet_NaN();
  o.wall_s = 3.4028234663852886e38;
  auto j = outcome_to_json(o);
  CHECK(j["speedup"] == "Infinity");
  CHECK(j["eager_ms"] == "NaN");
  CHECK(double_from_json(j["kernel_ms"]) == 1.1754943508222875e-38);
  CHECK(double_from_json(j["wall_s"]) == 3.4028234663852886e38);
  auto dir = std::filesystem::temp_directory_path() / ("ks-summary-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  run_summary s;
  s.experiment = "odd";
  s.coder = "rules";
  s.outcomes = {o};
  s.wall_s = inf;
  REQUIRE(write_summary(dir, s).ok());
  std::ifstream in(dir / "summary.json");
  auto sj = nlohmann::json::parse(in);
  CHECK(double_from_json(sj["geomean_speedup"]) == inf);
  CHECK(double_from_json(sj["wall_s"]) == inf);
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------
// Supervision as it fails in practice (issue 44): agents that hang or are killed while
// they work, a seed line killed, a coordinator killed while the daemon's scheduler
// lives. The actors are the real ones, killed with CAF exit messages (reason kill)
// through coordinator_options::on_spawn; the hang is the real llm coder waiting on the
// scripted model server, which answers late (scripted_reply::delay_s). Every case
// asserts that the task ends with its work, and none is lost.

namespace {

using steady = std::chrono::steady_clock;

// The actors a task started, as on_spawn reports them, and when each ended. Its state
// is shared with the functors it attaches, which may run after the log is gone (an
// agent ends when its hung call returns, as the actor system shuts down).
class spawn_log {
 public:
  struct entry {
    std::string role;
    caf::actor_addr addr;  // weak: the log keeps no actor alive
    steady::time_point spawned;
    std::optional<steady::time_point> ended;  // under the state's mutex
  };

  std::function<void(const std::string&, const caf::actor&)> hook() {
    return [st = st_](const std::string& role, const caf::actor& a) {
      auto e = std::make_shared<entry>(entry{role, a.address(), steady::now(), std::nullopt});
      {
        std::lock_guard lock(st->mu);
        st->entries.push_back(e);
      }
      // Runs on the actor's own thread as it terminates, before its down messages go.
      a->attach_functor([st, e](const caf::error&) {
        std::lock_guard lock(st->mu);
        e->ended = steady::now();
      });
      st->cv.notify_all();
    };
  }

  // The n-th actor (from 0) of `role`, waiting for it up to 60 s; null if none came.
  std::shared_ptr<entry> wait_for(const std::string& role, size_t n = 0) {
    std::unique_lock lock(st_->mu);
    std::shared_ptr<entry> out;
    st_->cv.wait_for(lock, std::chrono::seconds(60), [&] {
      size_t seen = 0;
      for (auto& e : st_->entries)
        if (e->role == role && seen++ == n) out = e;
      return out != nullptr;
    });
    return out;
  }

  // Those whose role starts with `prefix`, in the order they started.
  std::vector<std::shared_ptr<entry>> of_role(const std::string& prefix) {
    std::lock_guard lock(st_->mu);
    std::vector<std::shared_ptr<entry>> out;
    for (auto& e : st_->entries)
      if (e->role.rfind(prefix, 0) == 0) out.push_back(e);
    return out;
  }

  std::optional<steady::time_point> ended(const std::shared_ptr<entry>& e) {
    std::lock_guard lock(st_->mu);
    return e->ended;
  }

 private:
  struct state {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::shared_ptr<entry>> entries;
  };
  std::shared_ptr<state> st_ = std::make_shared<state>();
};

// Kills an actor of the log for real: an exit message with reason kill. False when it
// is gone already.
bool kill_actor(const spawn_log::entry& e) {
  auto a = caf::actor_cast<caf::actor>(e.addr);
  if (!a) return false;
  caf::anon_send_exit(a, caf::exit_reason::kill);
  return true;
}

// Waits until the checkpoint of `task`'s line `k` says it completed `round` rounds.
bool wait_for_checkpoint(fixture& f, const std::string& task, size_t k, uint32_t round) {
  const auto deadline = steady::now() + std::chrono::seconds(60);
  while (steady::now() < deadline) {
    auto rec = f.memory->get_task_record(checkpoint_prefix(task) + "line/" + std::to_string(k));
    if (rec.ok() && rec->has_value() && (**rec).value("round", 0u) >= round) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool is_optimizer(const recorded_request& r) {
  auto body = r.body_json();
  return body.is_object() &&
         body["messages"][0]["content"].get<std::string>().find("You are the optimizer") != std::string::npos;
}

// When each optimizer request reached the model server, in order.
struct call_times {
  std::mutex mu;
  std::vector<steady::time_point> at;
  std::vector<steady::time_point> get() {
    std::lock_guard lock(mu);
    return at;
  }
};

// The model server answers as the script says, but the optimizer's answers come
// `delay(call)` seconds late (its calls counted from 1). Returns when each came.
std::shared_ptr<call_times> slow_optimizer(fixture& f, std::function<double(int call)> delay) {
  auto calls = std::make_shared<call_times>();
  f.server.set_handler([&f, calls, delay](const recorded_request& r) {
    scripted_reply reply = answer(f.script, r);
    if (is_optimizer(r)) {
      int n = 0;
      {
        std::lock_guard lock(calls->mu);
        calls->at.push_back(steady::now());
        n = static_cast<int>(calls->at.size());
      }
      reply.delay_s = delay(n);
    }
    return reply;
  });
  return calls;
}

double seconds_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

TEST_CASE(
    "an agent that hangs is replaced after its timeout and its request re-sent, and the task "
    "goes on",
    "[agents][supervision][hang]") {
  fixture f("hang");
  f.script.generator = 1;  // the seed is correct
  // The first optimizer call hangs in the model: its answer comes 6 s late.
  auto calls = slow_optimizer(f, [](int call) { return call == 1 ? 6.0 : 0.0; });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 2);
  o.agent_timeout_s = 2;
  spawn_log log;
  o.on_spawn = log.hook();
  const auto t0 = steady::now();
  watched_run w = run_watched(sys, o, rv.reviewer);
  const auto t1 = steady::now();
  const double took = seconds_between(t0, t1);
  INFO(w.out.reason << "; took " << took << " s");
  REQUIRE(w.out.success);
  CHECK(w.out.rounds == 2);
  CHECK(w.out.agent_restarts >= 1);
  CHECK(w.out.best.origin.rfind("optimize:", 0) == 0);
  // The optimizer was replaced, and the hung call did not hold the task: the request
  // went to the fresh agent at the timeout, not after the hung call's 5 s.
  CHECK(log.of_role("optimizer of line 0").size() >= 2);
  CHECK(f.script.optimizer >= 3);  // the hung call, its re-send, the second round
  auto at = calls->get();
  REQUIRE(at.size() >= 2);
  // The re-send came at the 2 s timeout: not before it (the agent was given its time),
  // and not once the hung answer had come (the line did not wait for it).
  const double resent_after = seconds_between(at[0], at[1]);
  INFO("the optimizer's request was re-sent " << resent_after << " s after the hung one");
  CHECK(resent_after >= 1.9);
  CHECK(resent_after < 5.5);
  // The whole task ended before the hung call would have answered.
  CHECK(seconds_between(at[0], t1) < 5.5);
  // Each round's attempt is in the trajectory once: the late answer went nowhere.
  CHECK(count_kind(f.trajectory(), "optimize") == 2);
}

TEST_CASE("an agent that keeps hanging ends its line with the reason, and the task ends",
          "[agents][supervision][hang]") {
  fixture f("hang-always");
  f.script.generator = 1;
  // Every optimizer call hangs well past the timeout.
  auto calls = slow_optimizer(f, [](int) { return 6.0; });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 3);
  o.agent_timeout_s = 1.5;
  o.max_agent_restarts = 1;
  watched_run w = run_watched(sys, o, rv.reviewer);
  const auto t1 = steady::now();
  INFO(w.out.reason);
  // The request and its one re-send, each given up on at the timeout: the line ended
  // before the first hung answer came.
  auto at = calls->get();
  REQUIRE(at.size() == 2);
  CHECK(seconds_between(at[0], at[1]) >= 1.4);
  CHECK(seconds_between(at[0], t1) >= 2.9);
  CHECK(seconds_between(at[0], t1) < 5.5);
  // The seed is correct: the task keeps it; the line ended on the optimizer's hang.
  CHECK(w.out.success);
  CHECK_THAT(w.out.reason, Contains("the optimizer failed again (it did not answer within 1.5 s) after 1 restarts; "
                                    "giving up"));
  CHECK(w.out.agent_restarts == 1);
  CHECK(w.states().find("done") != std::string::npos);
}

TEST_CASE("an agent killed while it works: its request is answered, and the next goes to a fresh agent",
          "[agents][supervision][kill]") {
  fixture f("agent-killed");
  f.script.generator = 1;
  // The first optimizer call is in the model for 2 s: the agent is killed meanwhile.
  auto in_call = std::make_shared<std::atomic<bool>>(false);
  auto calls = std::make_shared<std::atomic<int>>(0);
  f.server.set_handler([&f, in_call, calls](const recorded_request& r) {
    scripted_reply reply = answer(f.script, r);
    if (is_optimizer(r) && ++*calls == 1) {
      reply.delay_s = 2;
      *in_call = true;
    }
    return reply;
  });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(1, 3);
  spawn_log log;
  o.on_spawn = log.hook();
  bool killed = false;  // Catch's assertions stay on the test's thread
  std::thread killer([&] {
    auto agent = log.wait_for("optimizer of line 0");
    const auto deadline = steady::now() + std::chrono::seconds(60);
    while (!*in_call && steady::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    killed = agent && *in_call && kill_actor(*agent);
  });
  const auto t0 = steady::now();
  watched_run w = run_watched(sys, o, rv.reviewer);
  const double took = std::chrono::duration<double>(steady::now() - t0).count();
  killer.join();
  INFO(w.out.reason << "; took " << took << " s");
  REQUIRE(killed);
  REQUIRE(w.out.success);
  CHECK(w.out.rounds == 3);
  auto agents = log.of_role("optimizer of line 0");
  REQUIRE(agents.size() == 2);  // the killed one, and its replacement
  CHECK(log.ended(agents[0]));
  // CAF ends a killed agent after the call it is in: that call's answer arrives, and
  // the next request, to the dead agent, restarts it (one restart, no request lost,
  // none sent twice).
  CHECK(w.out.agent_restarts == 1);
  CHECK(f.script.optimizer == 3);
  CHECK(count_kind(f.trajectory(), "optimize") == 3);
  CHECK(took < 25);  // no wait for the 30 s agent timeout
}

TEST_CASE("a seed line killed mid-run starts again from its checkpoint, and the task loses nothing",
          "[agents][supervision][line]") {
  fixture f("line-killed");
  f.script.generator = 1;                      // both seeds correct
  slow_optimizer(f, [](int) { return 0.3; });  // a round takes a while: the kill lands mid-line
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(2, 3);
  spawn_log log;
  o.on_spawn = log.hook();
  bool killed = false;
  std::thread killer([&] {
    auto line = log.wait_for("line 0");
    // Once its first round is complete.
    killed = line && wait_for_checkpoint(f, "relu", 0, 1) && kill_actor(*line);
  });
  watched_run w = run_watched(sys, o, rv.reviewer);
  killer.join();
  INFO(w.out.reason);
  REQUIRE(killed);
  REQUIRE(w.out.success);
  auto lines = log.of_role("line 0");
  REQUIRE(lines.size() == 2);  // killed, and started again
  auto killed_at = log.ended(lines[0]);
  REQUIRE(killed_at);
  CHECK(*killed_at <= lines[1]->spawned);
  // Both lines ran their 3 rounds: the killed one went on from its checkpoint.
  CHECK(w.out.rounds == 6);
  CHECK(w.out.reason.find("crashed") == std::string::npos);
  auto t = f.trajectory();
  size_t resumed = 0;
  for (const auto& e : t)
    if (e.kind == "note" && e.summary.find("resumed at round") != std::string::npos) ++resumed;
  CHECK(resumed == 1);
  CHECK(count_kind(t, "seed") == 2);
  // The line's end is recorded once per line: the killed run wrote no end.
  auto cp = line_checkpoint_record(f);
  CHECK(cp.value("finished", false));
  CHECK(cp.value("round", 0u) == 3);
}

namespace {

// Runs `f`'s task under the daemon's scheduler until it ends (90 s at most); `kill`
// runs on a thread of its own meanwhile.
queued_task run_under_scheduler(fixture& f, caf::actor_system& sys, const reviewer_actor& reviewer,
                                coordinator_options base, std::string* id_out,
                                const std::function<void(const std::string& id)>& kill) {
  auto q = task_queue::open(f.memory);
  REQUIRE(q.ok());
  auto submitted = (*q)->submit(f.task, 0, base.rounds);
  REQUIRE(submitted.ok());
  const std::string id = submitted->id;
  *id_out = id;
  scheduler_options so;
  so.base = std::move(base);
  so.tasks_in_flight = 1;
  scheduler sched(sys, **q, reviewer, so);
  sched.start();
  std::thread killer([&] { kill(id); });
  queued_task t;
  std::string lost;  // no assertion while the killer runs: a failed one would not join it
  const auto deadline = steady::now() + std::chrono::seconds(90);
  while (steady::now() < deadline) {
    auto got = (*q)->get(id);
    if (!got.ok() || !got->has_value()) {
      lost = got.ok() ? "the task is not in the queue" : got.message();
      break;
    }
    t = **got;
    if (t.state != task_state::queued && t.state != task_state::running) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  killer.join();
  sched.stop();
  INFO(lost);
  REQUIRE(lost.empty());
  return t;
}

}  // namespace

TEST_CASE("a coordinator killed mid-run: the daemon's scheduler resumes its task from its checkpoints",
          "[agents][supervision][coordinator]") {
  fixture f("coordinator-killed");
  f.script.generator = 1;
  slow_optimizer(f, [](int) { return 0.3; });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto base = f.options(2, 3);
  spawn_log log;
  base.on_spawn = log.hook();
  bool killed = false;
  std::string id;
  // The daemon lives on: the task is resumed, and ends.
  queued_task t = run_under_scheduler(f, sys, rv.reviewer, base, &id, [&](const std::string& task) {
    auto first = log.wait_for("coordinator");
    killed = first && wait_for_checkpoint(f, task, 0, 1) && kill_actor(*first);
  });
  INFO(t.reason);
  REQUIRE(killed);
  CHECK(t.state == task_state::done);
  CHECK(t.resumed == 1);
  auto coordinators = log.of_role("coordinator");
  REQUIRE(coordinators.size() == 2);
  // Every line of the killed run had stopped before the resumed run began: no two
  // runs of the task wrote to the store at once.
  auto killed_end = log.ended(coordinators[0]);
  REQUIRE(killed_end);
  size_t first_run_lines = 0;
  for (auto& l : log.of_role("line ")) {
    if (l->spawned > coordinators[1]->spawned) continue;
    ++first_run_lines;
    auto end = log.ended(l);
    REQUIRE(end);
    CHECK(*end <= *killed_end);
  }
  CHECK(first_run_lines == 2);
  auto traj = f.trajectory(id);
  CHECK(count_kind(traj, "seed") == 2);  // the seeds were not written again
  size_t resumed_notes = 0;
  for (const auto& e : traj)
    if (e.kind == "note" && e.summary.find("resumed at round") != std::string::npos) ++resumed_notes;
  CHECK(resumed_notes >= 1);
  CHECK(t.best_speedup > 0);
}

TEST_CASE(
    "a seed line killed at each start is given up on after its restarts, and the task ends with the other "
    "line's work",
    "[agents][supervision][line]") {
  fixture f("line-killed-always");
  f.script.generator = 1;  // both seeds correct
  slow_optimizer(f, [](int) { return 0.3; });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto o = f.options(2, 3);
  o.max_line_restarts = 2;
  spawn_log log;
  o.on_spawn = log.hook();
  int killed = 0;
  std::thread killer([&] {
    // The line, and each of its two restarts, as soon as it starts.
    for (size_t n = 0; n < 3; ++n)
      if (auto line = log.wait_for("line 0", n); line && kill_actor(*line)) ++killed;
  });
  watched_run w = run_watched(sys, o, rv.reviewer);
  killer.join();
  INFO(w.out.reason);
  REQUIRE(killed == 3);
  CHECK(log.of_role("line 0").size() == 3);  // not started a fourth time
  // The other line's kernel is the task's, and the reason says what became of line 0.
  REQUIRE(w.out.success);
  CHECK(w.out.rounds == 3);
  CHECK_THAT(w.out.reason, Contains("seed line 0 stopped (" + sys.render(caf::make_error(caf::exit_reason::kill)) +
                                    ") after 2 restarts"));
  // What the killed line had done stays in the trajectory: its seed and its review.
  auto t = f.trajectory();
  CHECK(count_kind(t, "seed") == 2);
  CHECK(count_kind(t, "review") >= 2);
}

TEST_CASE("a coordinator killed at each resume fails its task with the reason, and its work stays in the store",
          "[agents][supervision][coordinator]") {
  fixture f("coordinator-killed-always");
  f.script.generator = 1;
  slow_optimizer(f, [](int) { return 0.3; });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  auto base = f.options(2, 3);
  base.max_coordinator_restarts = 2;
  spawn_log log;
  base.on_spawn = log.hook();
  int killed = 0;
  std::string id;
  queued_task t = run_under_scheduler(f, sys, rv.reviewer, base, &id, [&](const std::string& task) {
    // The first run once a round is done (there is work to keep), then each resumed
    // run as it starts.
    for (size_t n = 0; n < 3; ++n) {
      auto c = log.wait_for("coordinator", n);
      if (!c) return;
      if (n == 0 && !wait_for_checkpoint(f, task, 0, 1)) return;
      if (kill_actor(*c)) ++killed;
    }
  });
  INFO(t.reason);
  REQUIRE(killed == 3);
  CHECK(t.state == task_state::failed);
  CHECK(t.resumed == 2);
  CHECK(t.reason == "the task coordinator stopped 3 times (the last: " +
                        sys.render(caf::make_error(caf::exit_reason::kill)) + "); not resumed again");
  CHECK(log.of_role("coordinator").size() == 3);
  // Every line ended before the task was failed: nothing of it runs on.
  for (auto& l : log.of_role("line ")) CHECK(log.ended(l));
  // The work of the killed runs is kept: the seeds (written once) and the reviews.
  auto traj = f.trajectory(id);
  CHECK(count_kind(traj, "seed") == 2);
  CHECK(count_kind(traj, "review") >= 2);
  CHECK(count_kind(traj, "optimize") >= 1);
}

TEST_CASE("a coordinator killed mid-run under the experiment runner is resumed, and the run's next task goes on",
          "[agents][supervision][coordinator]") {
  fixture f("coordinator-killed-runner");
  f.script.generator = 100;  // every seed good (the counter is shared by the tasks)
  slow_optimizer(f, [](int) { return 0.3; });
  test_system_config cfg;
  caf::actor_system sys{cfg};
  scripted_review rv(sys, f);
  experiment_options eo;
  eo.name = "supervision";
  task_spec a = f.task, b = f.task;
  a.name = "relu_a";
  b.name = "relu_b";
  eo.tasks = {a, b};
  eo.tasks_in_flight = 1;  // relu_a's coordinator is the first, its resumed one the second
  eo.base = f.options(1, 3);
  spawn_log log;
  eo.base.on_spawn = log.hook();
  bool killed = false;
  std::thread killer([&] {
    auto first = log.wait_for("coordinator");
    killed = first && wait_for_checkpoint(f, "relu_a", 0, 1) && kill_actor(*first);
  });
  run_summary s = run_experiment(sys, eo, rv.reviewer);
  killer.join();
  REQUIRE(killed);
  REQUIRE(s.outcomes.size() == 2);
  for (const auto& o : s.outcomes) {
    INFO(o.task << ": " << o.reason);
    CHECK(o.success);
    CHECK(o.rounds == 3);  // relu_a's killed run went on from its checkpoint
  }
  CHECK(log.of_role("coordinator").size() == 3);  // relu_a twice, relu_b once
  auto ta = f.trajectory("relu_a");
  CHECK(count_kind(ta, "seed") == 1);
  size_t resumed = 0;
  for (const auto& e : ta)
    if (e.kind == "note" && e.summary.find("resumed at round") != std::string::npos) ++resumed;
  CHECK(resumed == 1);
}
