// The plan across rounds and experience across tasks (issue 48, points 2 and 3), end to
// end without a GPU: real agents (CAF actors), the real rules coder (graphs from
// kernelskill-gpu --graph on the CPU, its kernels and their legal moves), the real
// decision policy and skill library, a real RocksDB store. Only the GPU is a stand-in:
// `landscape_gpu` answers each review with a speedup made of its parent's and a
// factor per method the test chooses — a landscape in which moves help, or hurt — and
// the profile of a bandwidth-bound elementwise kernel (so the planner classifies and
// ranks as it would on the GPU).

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include <caf/all.hpp>

#include "actors/agents.hpp"
#include "actors/task_coordinator.hpp"
#include "coder/rules_coder.hpp"
#include "policy/decision_policy.hpp"
#include "policy/skill_library.hpp"
#include "store/store.hpp"
#include "task/task_loader.hpp"

namespace fs = std::filesystem;
using namespace ks;
using Catch::Matchers::Contains;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kWorker = fs::path(KS_BINARY_DIR) / "bin" / "kernelskill-gpu";

struct test_system_config : caf::actor_system_config {
  test_system_config() {
    register_protocol(*this);
    set("scheduler.max-threads", 4);
  }
};

// An elementwise task: `expr` of x.
task_spec elementwise_task(const std::string& name, const std::string& expr, const std::string& shape) {
  const std::string yaml = "name: " + name + "\nreference:\n  torchscript: |\n    def forward(x):\n        return " +
                           expr + "\ninputs:\n  - {name: x, shape: " + shape + ", dtype: float32}\n";
  auto t = parse_task(yaml, name + ".yaml", kSource);
  if (!t) FAIL(t.message());
  return *t;
}

// The stand-in GPU's landscape. A seed is 1.0x; an attempt (origin optimize:METHOD)
// is its parent's speedup × factor(method, n), n counting the attempts from 1.
struct landscape {
  std::mutex mu;
  std::function<double(const std::string& method, int n)> factor;
  std::map<std::string, double> speedup;  // by candidate id
  int attempts = 0;
  std::vector<std::string> applied;  // the attempts' methods, in review order
};

gpu_pool_actor::behavior_type landscape_gpu(gpu_pool_actor::pointer, std::shared_ptr<landscape> l) {
  return {[](describe_atom) {
            worker_info w;
            w.host = "landscape";
            return w;
          },
          [=](const review_request& req) -> review_result {
            std::lock_guard lock(l->mu);
            const candidate& c = req.cand;
            double s = 1.0;
            if (c.origin.rfind("optimize:", 0) == 0) {
              const std::string method = c.origin.substr(9);
              auto parent = l->speedup.find(c.parent_id);
              s = (parent == l->speedup.end() ? 1.0 : parent->second) * l->factor(method, ++l->attempts);
              l->applied.push_back(method);
            }
            l->speedup[c.id] = s;
            review_result r;
            r.request_id = req.request_id;
            r.candidate_id = c.id;
            r.device = "landscape/0";
            r.status = review_status::ok;
            r.trials_run = r.trials_passed = req.options.trials;
            r.reference_time.median_ms = 1.0;
            r.candidate_time.median_ms = 1.0 / s;
            r.speedup = s;
            r.profile.values = {{"dram_throughput_pct", 72.5},    {"l2_throughput_pct", 40.1},
                                {"l1_throughput_pct", 35.0},      {"sm_throughput_pct", 18.2},
                                {"achieved_occupancy_pct", 81.0}, {"stall_long_scoreboard_pct", 55.0},
                                {"branch_efficiency_pct", 100}};
            r.profile.kernel_launches = 1;
            r.profile.duration_ms = 1.0 / s;
            r.message = "correct (landscape stand-in)";
            return r;
          }};
}

struct fixture {
  fs::path dir;
  std::shared_ptr<const skill_library> library;
  std::shared_ptr<rules_coder> coder;

  // explore: methods move through the templates' search spaces (rules_coder_options::
  // explore_space); off, a method takes its listed values only, as before the spaces.
  explicit fixture(const std::string& name, bool explore = true) {
    dir = fs::temp_directory_path() / ("ks-plan-rounds-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto lib = load_skill_library(kSource / "skills");
    REQUIRE(lib.ok());
    library = std::make_shared<const skill_library>(*lib);
    rules_coder_options o;
    o.gpu_worker = kWorker;
    o.skills_dir = kSource / "skills";
    o.explore_space = explore;
    coder = std::make_shared<rules_coder>(o, *lib);
  }
  ~fixture() { fs::remove_all(dir); }

  std::shared_ptr<store> open_store(const std::string& name) {
    auto db = store::open(dir / name);
    REQUIRE(db.ok());
    return std::move(*db);
  }

  // Runs `task` to its end against the landscape, on `memory`.
  task_outcome run(const task_spec& task, std::shared_ptr<store> memory, std::shared_ptr<landscape> l, uint32_t seeds,
                   uint32_t rounds) {
    test_system_config cfg;
    caf::actor_system sys{cfg};
    auto gpu = sys.spawn(landscape_gpu, l);
    auto reviewer = sys.spawn(reviewer_agent, std::vector<gpu_pool_actor>{gpu});
    coordinator_options o;
    o.task = task;
    o.seeds = seeds;
    o.rounds = rounds;
    o.repair_attempts = 1;
    o.backend = coder;
    o.library = library;
    o.memory = std::move(memory);
    o.agent_timeout_s = 120;
    task_outcome out = run_task(sys, o, reviewer, caf::actor{});
    caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(gpu, caf::exit_reason::user_shutdown);
    return out;
  }
};

std::vector<trajectory_entry> trajectory(store& memory, const std::string& task) {
  auto t = memory.read_trajectory(task);
  REQUIRE(t.ok());
  return *t;
}

// The attempts of a trajectory: its review entries that name a method, in order.
std::vector<trajectory_entry> attempts(const std::vector<trajectory_entry>& t) {
  std::vector<trajectory_entry> out;
  for (const auto& e : t)
    if (e.kind == "review" && !e.method.empty()) out.push_back(e);
  return out;
}

std::vector<trajectory_entry> plans(const std::vector<trajectory_entry>& t) {
  std::vector<trajectory_entry> out;
  for (const auto& e : t)
    if (e.kind == "plan") out.push_back(e);
  return out;
}

// The methods that made `id`, oldest first (following parent_id through the attempts).
std::vector<std::string> lineage(const std::vector<trajectory_entry>& t, std::string id) {
  std::vector<std::string> out;
  for (bool found = true; found;) {
    found = false;
    for (const auto& a : attempts(t))
      if (a.candidate_id == id) {
        out.insert(out.begin(), a.method);
        id = a.parent_id;
        found = true;
        break;
      }
  }
  return out;
}

std::string describe(const std::vector<trajectory_entry>& t) {
  std::string s;
  for (const auto& e : t)
    s += std::to_string(e.seq) + " " + e.kind + " " + e.candidate_id.substr(0, 8) + "<-" + e.parent_id.substr(0, 8) +
         " " + e.method + ": " + e.summary.substr(0, 300) + "\n";
  return s;
}

// No move (a method on a candidate) is attempted twice.
void check_no_repeated_move(const std::vector<trajectory_entry>& t) {
  std::set<std::pair<std::string, std::string>> moves;
  for (const auto& a : attempts(t)) {
    INFO("seq " << a.seq << ": " << a.method << " on " << a.parent_id);
    CHECK(moves.insert({a.parent_id, a.method}).second);
  }
}

}  // namespace

TEST_CASE(
    "a line plans across its rounds: the next move after a regression, the moves that helped composed, none "
    "repeated",
    "[plan][rounds]") {
  fixture f("compose");
  auto memory = f.open_store("memory");
  auto l = std::make_shared<landscape>();
  // The first attempt is slower; every later one gains 10 %.
  l->factor = [](const std::string&, int n) { return n == 1 ? 0.8 : 1.1; };
  const task_spec task = elementwise_task("relu", "torch.relu(x)", "[4096, 1024]");
  const uint32_t rounds = 6;
  const task_outcome out = f.run(task, memory, l, 1, rounds);
  const auto t = trajectory(*memory, "relu");
  INFO(describe(t));
  REQUIRE(out.success);
  // Legal moves remained every round: the line used all of its rounds.
  CHECK_THAT(out.reason, Contains("(round budget spent)"));
  CHECK(out.rounds == rounds);
  const auto tried = attempts(t);
  REQUIRE(tried.size() == rounds);
  // After the regression, the next move on the same kernel, not the same move again.
  CHECK(tried[1].parent_id == tried[0].parent_id);
  CHECK(tried[1].method != tried[0].method);
  check_no_repeated_move(t);
  // The moves that helped are composed: the best kernel is the seed with the five
  // gaining moves applied one on the other (1.1^5).
  const auto made = lineage(t, out.best.id);
  CHECK(made.size() == rounds - 1);
  CHECK(out.best_review.speedup == Approx(std::pow(1.1, rounds - 1)));
  // The rules coder's contract holds for every move: it changed its kernel (each
  // attempt is another candidate than its parent).
  for (const auto& a : tried) CHECK(a.candidate_id != a.parent_id);
}

TEST_CASE("a line whose moves all regress tries each legal move of its kernel once, then ends", "[plan][rounds]") {
  fixture f("regress");
  auto memory = f.open_store("memory");
  auto l = std::make_shared<landscape>();
  l->factor = [](const std::string&, int) { return 0.9; };
  const task_spec task = elementwise_task("relu", "torch.relu(x)", "[4096, 1024]");
  const task_outcome out = f.run(task, memory, l, 1, 60);
  const auto t = trajectory(*memory, "relu");
  INFO(describe(t));
  REQUIRE(out.success);
  const auto tried = attempts(t);
  // More than one method was tried: the line did not stop after the first.
  CHECK(tried.size() >= 2);
  CHECK(out.rounds < 60);
  CHECK_THAT(out.reason, Contains("no allowed method left") || Contains("no move left is expected to gain more") ||
                             Contains("no allowed method could be applied"));
  check_no_repeated_move(t);
  // Every attempt was on the seed (none helped), with a method its recipe lists (a move
  // that changes its kernels): the policy never offered another.
  std::set<std::string> legal;
  {
    const std::string methods = out.best.recipe.at("methods");
    size_t from = 0;
    for (size_t at; (at = methods.find(',', from)) != std::string::npos; from = at + 1)
      legal.insert(methods.substr(from, at - from));
    legal.insert(methods.substr(from));
  }
  for (const auto& a : tried) {
    CHECK(a.parent_id == out.best.id);
    CHECK(legal.count(a.method));
  }
  // Each legal move of the seed was tried once, or skipped because it gives back a
  // kernel reviewed before (two methods may change one parameter alike), or is vetoed
  // by the last plan (forbidden by the table, a precondition, the noise): none was
  // left untried for want of rounds.
  const auto p = plans(t);
  REQUIRE_FALSE(p.empty());
  std::set<std::string> settled;
  for (const auto& a : tried) settled.insert(a.method);
  for (const auto& e : t)
    if (e.kind == "optimize" && e.summary.find("not applied: it gives back") == 0) settled.insert(e.method);
  for (const auto& m : legal) {
    INFO("legal move " << m);
    CHECK((settled.count(m) || p.back().summary.find("vetoed " + m + ": ") != std::string::npos));
  }
}

TEST_CASE("experience from one task changes a later task's choice", "[plan][experience]") {
  fixture f("experience");
  const task_spec later = elementwise_task("abs_later", "torch.abs(x)", "[2048, 2048]");

  // What the later task chooses first on a memory with no experience.
  std::string first_choice;
  std::vector<std::string> ranked_first;
  {
    auto fresh = f.open_store("fresh");
    auto l = std::make_shared<landscape>();
    l->factor = [](const std::string&, int) { return 1.1; };
    f.run(later, fresh, l, 1, 1);
    const auto p = plans(trajectory(*fresh, "abs_later"));
    REQUIRE(p.size() == 1);
    first_choice = p[0].method;
    INFO(p[0].summary);
    REQUIRE_FALSE(first_choice.empty());
    CHECK_THAT(p[0].summary, !Contains("experience moved"));
  }
  INFO("the later task's first choice on an empty memory: " << first_choice);

  // Earlier tasks (ReLUs, of the same template and bottleneck class) in which that
  // method made the kernel slower and every other move gained 10 %.
  auto memory = f.open_store("memory");
  auto l = std::make_shared<landscape>();
  l->factor = [&](const std::string& m, int) { return m == first_choice ? 0.85 : 1.1; };
  bool tried = false;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "relu_" + std::to_string(i);
    f.run(elementwise_task(name, "torch.relu(x)", "[4096, 1024]"), memory, l, 1, 4);
    for (const auto& a : attempts(trajectory(*memory, name))) tried = tried || a.method == first_choice;
  }
  REQUIRE(tried);  // the earlier tasks did apply it
  auto stats = memory->experience_stats();
  REQUIRE(stats.ok());
  bool recorded = false;
  for (const auto& s : *stats)
    if (s.method == first_choice) {
      recorded = true;
      CHECK(s.realized_gain == 1.0);  // it never gave a line anything
    }
  CHECK(recorded);

  // The later task, on the memory the earlier ones left: another first choice, and its
  // plan says experience moved it.
  auto l2 = std::make_shared<landscape>();
  l2->factor = [](const std::string&, int) { return 1.1; };
  f.run(later, memory, l2, 1, 1);
  const auto p = plans(trajectory(*memory, "abs_later"));
  REQUIRE(p.size() == 1);
  INFO(p[0].summary);
  CHECK(p[0].method != first_choice);
  CHECK_THAT(p[0].summary, Contains("experience moved the choice from " + first_choice + " to " + p[0].method));
}

TEST_CASE("a line explores more distinct moves through the templates' search spaces than with the listed values",
          "[plan][rounds][space]") {
  // A row sum of |x| (4096 rows of 4096): |x| computed on the reduction's loads, so
  // the loads a thread keeps in flight (elements_per_thread) are a parameter of the
  // row_reduce template, as are its block, its row mapping and fusing the prologue.
  // Every move gains 10 %, so a line composes whatever it is offered until its rounds
  // or its moves run out.
  const uint32_t rounds = 60;
  auto run_line = [&](bool explore) {
    fixture f(explore ? "space-on" : "space-off", explore);
    auto memory = f.open_store("memory");
    auto l = std::make_shared<landscape>();
    l->factor = [](const std::string&, int) { return 1.1; };
    const task_spec task = [] {
      const std::string yaml =
          "name: abs_row_sum\nreference:\n  torchscript: |\n    def forward(x):\n        return "
          "torch.sum(torch.abs(x), -1)\n"
          "inputs:\n  - {name: x, shape: [4096, 4096], dtype: float32}\nsizes:\n  cpu: {x: [8, 256]}\n";
      auto t = parse_task(yaml, "abs_row_sum.yaml", kSource);
      if (!t) FAIL(t.message());
      return *t;
    }();
    const task_outcome out = f.run(task, memory, l, 1, rounds);
    const auto t = trajectory(*memory, "abs_row_sum");
    INFO((explore ? "with the space\n" : "listed values only\n") << describe(t) << out.reason);
    REQUIRE(out.success);
    check_no_repeated_move(t);
    std::set<std::pair<std::string, std::string>> moves;  // (kernel, method): each distinct
    std::set<std::string> methods;
    for (const auto& a : attempts(t)) {
      moves.insert({a.parent_id, a.method});
      methods.insert(a.method);
    }
    return std::make_tuple(moves.size(), methods, out.reason);
  };
  const auto [listed, listed_methods, listed_reason] = run_line(false);
  const auto [explored, explored_methods, explored_reason] = run_line(true);
  INFO("listed values only: " << listed << " moves (" << listed_reason << "); with the space: " << explored << " ("
                              << explored_reason << ")");
  CHECK(explored > listed);
  // The loads in flight of the reduction's prologue: a parameter of the row_reduce
  // template's space, which the listed values (elementwise and pool kernels only)
  // never reached.
  CHECK(explored_methods.count("increase_ilp_elements_per_thread"));
  CHECK_FALSE(listed_methods.count("increase_ilp_elements_per_thread"));
}
