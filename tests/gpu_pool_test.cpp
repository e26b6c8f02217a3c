// The gpu pool actor with real worker processes: kills and stops are made for real
// (SIGKILL, SIGSTOP) on kernelskill-gpu, aborts and hangs from inside a fake worker
// (fake_gpu_worker), and the pool must answer every request and go on with a fresh
// worker. Needs no GPU: the worker runs everywhere. Where there is a GPU, more tests
// send real faulting, trapping and hanging kernels through the pool, and through a
// node agent (`kernelskill-gpu --listen`, a pool per device) from a remote pool.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "base/content_hash.hpp"
#include "fleet/gpu_pool.hpp"
#include "fleet/node_link.hpp"
#include "fleet/remote_pool.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "task/task_loader.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/gpu_skip.hpp"

using namespace ks;
using namespace std::chrono_literals;

namespace {

struct pool_config : caf::actor_system_config {
  pool_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
  }
};

struct fixture {
  pool_config cfg;
  caf::actor_system sys{cfg};
  gpu_pool_actor pool;

  explicit fixture(const std::string& binary = "kernelskill-gpu", double stopped_limit_s = 5,
                   uint64_t module_part_bytes = gpu_pool_options{}.module_part_bytes) {
    gpu_pool_options opts;
    opts.worker.binary = std::string(KS_BINARY_DIR) + "/bin/" + binary;
    opts.review_margin_s = 1.0;
    opts.stopped_limit_s = stopped_limit_s;
    opts.module_part_bytes = module_part_bytes;
    pool = sys.spawn<caf::detached>(gpu_pool, opts);
  }
  ~fixture() { caf::anon_send_exit(pool, caf::exit_reason::user_shutdown); }

  worker_info describe() {
    caf::scoped_actor self{sys};
    worker_info out;
    self->request(pool, 60s, describe_atom::value)
        .receive([&](worker_info& info) { out = std::move(info); },
                 [&](caf::error& err) { FAIL("describe failed: " << sys.render(err)); });
    return out;
  }
};

// A candidate that cannot compile: on a GPU machine the review ends in compile_error,
// elsewhere the worker says it has no GPU; either way it returns quickly.
review_request small_review(uint64_t id, double timeout_s = 30) {
  review_request r;
  r.request_id = id;
  r.task.name = "t";
  r.task.torchscript = "def forward(x):\n    return x\n";
  r.task.inputs = {{"x", {8}, "float32", {}}};
  r.cand.id = "c" + std::to_string(id);
  r.cand.source = "this is not CUDA";
  r.options.timeout_s = timeout_s;
  r.options.time = false;
  return r;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0; }

// SIGSTOP, and wait until every thread of the process has stopped: the stop begins
// only once one of its threads is scheduled, and on a loaded machine the others can
// still read and answer a request meanwhile.
void stop_process(pid_t pid) {
  ::kill(pid, SIGSTOP);
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (int i = 0; i < 1000; ++i) {
    bool all = true;
    for (const auto& t : std::filesystem::directory_iterator(tasks)) {
      std::ifstream stat(t.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto paren = line.rfind(')');
      const char state = paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
      if (state != 'T' && state != 't') all = false;
    }
    if (all) return;
    std::this_thread::sleep_for(10ms);
  }
  FAIL("process " << pid << " did not stop within 10 s");
}

review_result review(fixture& f, const review_request& req) {
  caf::scoped_actor self{f.sys};
  review_result out;
  self->request(f.pool, 300s, req)
      .receive([&](review_result& r) { out = std::move(r); },
               [&](caf::error& err) { FAIL("review failed: " << f.sys.render(err)); });
  std::printf("review %llu: %s: %s\n", static_cast<unsigned long long>(req.request_id), to_string(out.status),
              out.message.c_str());
  return out;
}

}  // namespace

TEST_CASE("the pool starts a worker and answers describe through it", "[gpu_pool]") {
  fixture f;
  auto info = f.describe();
  CHECK(info.pid > 0);
  CHECK(info.version == protocol_version);
  CHECK(process_exists(info.pid));
}

TEST_CASE("reviews are answered one at a time, in order", "[gpu_pool]") {
  fixture f;
  caf::scoped_actor self{f.sys};
  std::vector<uint64_t> answered;
  for (uint64_t id = 1; id <= 3; ++id) {
    self->request(f.pool, 60s, small_review(id))
        .receive(
            [&](review_result& r) {
              answered.push_back(r.request_id);
              CHECK(r.status != review_status::timed_out);
              CHECK(r.status != review_status::crashed);
              CHECK_FALSE(r.message.empty());
            },
            [&](caf::error& err) { FAIL(f.sys.render(err)); });
  }
  CHECK(answered == std::vector<uint64_t>{1, 2, 3});
}

// Past CAF's 4 GiB a message drops its link (level 2's 4.3 GB GEMMs lost three
// workers a review): a module larger than a part (1 KiB here, 256 MiB in use) reaches
// the worker once, in parts, ahead of its reviews. The fake worker names the module it
// reviewed and the parts it has taken: the whole module arrives (its size and digest),
// a second review of it sends no part, a module of at most a part travels inside its
// review, and a module the worker dropped for room (it keeps 6000 bytes here) is sent
// again. The worker is never lost.
TEST_CASE("a module larger than a part reaches the worker once, in parts, ahead of its reviews", "[gpu_pool]") {
  ::setenv("KS_FAKE_MODULE_KEEP_BYTES", "6000", 1);
  fixture f("fake_gpu_worker", 5, 1024);
  const auto pid = f.describe().pid;
  auto module = [](char seed, size_t n) {
    std::string m(n, '\0');
    for (size_t i = 0; i < n; ++i) m[i] = static_cast<char>(seed + i * 7 + i / 251);
    return m;
  };
  const std::string a = module('a', 5000), b = module('b', 5000), small = module('s', 1000);
  auto with = [](uint64_t id, const std::string& m) {
    auto r = small_review(id);
    r.task.module_bytes = m;
    return r;
  };
  auto says = [](const std::string& m, int parts) {
    return Catch::Contains("module of " + std::to_string(m.size()) + " bytes, sha256 " + sha256_hex(m) + "; " +
                           std::to_string(parts) + " parts taken");
  };
  CHECK_THAT(review(f, with(1, a)).message, says(a, 5));          // 5000 bytes: five parts
  CHECK_THAT(review(f, with(2, a)).message, says(a, 5));          // held: no part sent
  CHECK_THAT(review(f, with(3, small)).message, says(small, 5));  // inside its review
  CHECK_THAT(review(f, with(4, b)).message, says(b, 10));         // a is dropped for b
  CHECK_THAT(review(f, with(5, a)).message, says(a, 15));         // not held: sent again
  CHECK(f.describe().pid == pid);
  CHECK(gpu_pool_options{}.module_part_bytes == kModulePartBytes);
  ::unsetenv("KS_FAKE_MODULE_KEEP_BYTES");
}

// The same through the real worker: a saved TorchScript module (tests/data/
// swish_module.pt) sent in parts of 256 bytes is the module the worker's reference check
// loads and runs (on the CPU here), so the review gets as far as it does with the module
// inside the request.
TEST_CASE("the worker reviews a task whose module came in parts as one whose module came whole", "[gpu_pool]") {
  std::ifstream in(std::filesystem::path(KS_SOURCE_DIR) / "tests" / "data" / "swish_module.pt", std::ios::binary);
  const std::string pt((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(pt.size() > 1024);
  auto req = small_review(1);
  req.task.name = "swish_pt";
  req.task.torchscript.clear();
  req.task.module_bytes = pt;
  req.task.inputs = {{"x", {8}, "float32", {}}};
  std::string whole, parts;
  {
    fixture f;
    whole = review(f, req).message;
  }
  {
    fixture f("kernelskill-gpu", 5, 256);
    parts = review(f, req).message;
    req.request_id = 2;
    CHECK(review(f, req).message == parts);  // the module held from the first review
  }
  CHECK_FALSE(whole.empty());
  CHECK(parts == whole);
  CHECK_THAT(parts, !Catch::Contains("module"));
}

TEST_CASE("a worker killed while idle is replaced", "[gpu_pool]") {
  fixture f;
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  ::kill(first, SIGKILL);
  std::this_thread::sleep_for(500ms);  // let the down message arrive
  auto second = f.describe().pid;
  CHECK(second > 0);
  CHECK(second != first);
  CHECK(process_exists(second));
}

// A stopped worker keeps its connection open and never answers. That is not the
// candidate's doing (a kernel that hangs leaves its process running), so the review
// is not answered timed_out: the worker is killed and the review runs again.
TEST_CASE("a worker stopped at its review's time limit is replaced, and the review runs again",
          "[gpu_pool][supervision]") {
  fixture f;
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  stop_process(first);
  caf::scoped_actor self{f.sys};
  auto start = std::chrono::steady_clock::now();
  // The time limit (0.5 s + the 1 s margin) comes before the stopped limit (5 s).
  self->request(f.pool, 60s, small_review(7, /*timeout_s=*/0.5))
      .receive(
          [&](review_result& r) {
            INFO("worker pid " << first << "; answer: " << r.message);
            CHECK(r.request_id == 7);
            CHECK(r.status != review_status::timed_out);
            CHECK(r.status != review_status::crashed);
            CHECK(r.message.find("lost") == std::string::npos);
          },
          [&](caf::error& err) { FAIL(f.sys.render(err)); });
  CHECK(std::chrono::steady_clock::now() - start < 20s);
  CHECK_FALSE(process_exists(first));
  auto second = f.describe().pid;
  CHECK(second > 0);
  CHECK(second != first);
}

TEST_CASE(
    "a worker that stops answering during a review, its link open, is noticed within the stopped "
    "limit, replaced, and the review runs again",
    "[gpu_pool][supervision]") {
  fixture f("kernelskill-gpu", /*stopped_limit_s=*/1);
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  stop_process(first);  // SIGSTOP: the connection stays open, nothing answers
  caf::scoped_actor self{f.sys};
  auto start = std::chrono::steady_clock::now();
  self->request(f.pool, 60s, small_review(8, /*timeout_s=*/60))
      .receive(
          [&](review_result& r) {
            INFO("answer: " << r.message);
            CHECK(r.request_id == 8);
            CHECK(r.status != review_status::timed_out);
            CHECK(r.status != review_status::crashed);
          },
          [&](caf::error& err) { FAIL(f.sys.render(err)); });
  // Noticed at the stopped limit, long before the review's 61 s.
  CHECK(std::chrono::steady_clock::now() - start < 15s);
  CHECK_FALSE(process_exists(first));
  // A worker stopped while idle is replaced as well.
  auto second = f.describe().pid;
  REQUIRE(second > 0);
  CHECK(second != first);
  stop_process(second);
  std::this_thread::sleep_for(2500ms);
  CHECK_FALSE(process_exists(second));
  auto third = f.describe().pid;
  CHECK(third > 0);
  CHECK(third != second);
}

TEST_CASE("a worker killed (SIGKILL) during a review: the review runs again on a fresh worker",
          "[gpu_pool][supervision]") {
  fixture f;
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  stop_process(first);  // so that the review is surely in flight when the kill comes
  caf::scoped_actor self{f.sys};
  auto pending = self->request(f.pool, 60s, small_review(9, 30));
  std::this_thread::sleep_for(300ms);
  ::kill(first, SIGKILL);
  std::move(pending).receive(
      [&](review_result& r) {
        INFO("answer: " << r.message);
        CHECK(r.request_id == 9);
        // Killed from outside: not the candidate's doing, so not its verdict.
        CHECK(r.status != review_status::crashed);
        CHECK(r.message.find("lost") == std::string::npos);
      },
      [&](caf::error& err) { FAIL(f.sys.render(err)); });
  auto second = f.describe().pid;
  CHECK(second > 0);
  CHECK(second != first);
  self->request(f.pool, 60s, small_review(10))
      .receive([&](review_result& r) { CHECK(r.status != review_status::crashed); },
               [&](caf::error& err) { FAIL(f.sys.render(err)); });
}

namespace {

// The pids of this process's children named `comm`.
std::set<pid_t> children_named(const std::string& comm) {
  std::set<pid_t> out;
  for (const auto& p : std::filesystem::directory_iterator("/proc")) {
    const std::string name = p.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(p.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 >= line.size()) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid() && state != 'Z' && line.substr(open + 1, close - open - 1) == comm)
      out.insert(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "a review whose worker is killed again and again is answered internal_error, never blamed on "
    "the candidate",
    "[gpu_pool][supervision]") {
  fixture f("fake_gpu_worker");
  REQUIRE(f.describe().pid > 0);
  auto hanging = small_review(15, 60);
  hanging.cand.source = "hang";  // each worker sits in the review until it is killed
  caf::scoped_actor self{f.sys};
  auto pending = self->request(f.pool, 120s, hanging);
  std::set<pid_t> killed;
  for (int i = 0; i < 3; ++i) {
    pid_t victim = -1;
    for (int tries = 0; tries < 3000 && victim < 0; ++tries) {
      for (pid_t p : children_named("fake_gpu_worker"))
        if (!killed.count(p)) victim = p;
      if (victim < 0) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(victim > 0);
    std::this_thread::sleep_for(300ms);  // the review reaches it
    ::kill(victim, SIGKILL);
    killed.insert(victim);
  }
  std::move(pending).receive(
      [&](review_result& r) {
        INFO("answer: " << r.message);
        CHECK(r.request_id == 15);
        CHECK(r.status == review_status::internal_error);
        CHECK_THAT(r.message, Catch::Matchers::Contains("lost 3 times"));
        CHECK_THAT(r.message, Catch::Matchers::Contains("killed by signal 9"));
      },
      [&](caf::error& err) { FAIL(f.sys.render(err)); });
  // The pool goes on.
  self->request(f.pool, 60s, small_review(16))
      .receive([&](review_result& r) { CHECK(r.status == review_status::internal_error); },
               [&](caf::error& err) { FAIL(f.sys.render(err)); });
}

TEST_CASE("a worker that aborts during a review gives 'crashed' with the signal", "[gpu_pool]") {
  fixture f("fake_gpu_worker");  // aborts when asked (see fake_gpu_worker_main.cpp)
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  auto aborting = small_review(11, 30);
  aborting.cand.source = "abort";
  caf::scoped_actor self{f.sys};
  self->request(f.pool, 60s, aborting)
      .receive(
          [&](review_result& r) {
            CHECK(r.request_id == 11);
            CHECK(r.status == review_status::crashed);
            CHECK_THAT(r.message, Catch::Matchers::Contains("killed by signal 6"));
          },
          [&](caf::error& err) { FAIL(f.sys.render(err)); });
  auto second = f.describe().pid;
  CHECK(second > 0);
  CHECK(second != first);
  self->request(f.pool, 60s, small_review(12))
      .receive([&](review_result& r) { CHECK(r.status != review_status::crashed); },
               [&](caf::error& err) { FAIL(f.sys.render(err)); });
}

TEST_CASE("a review that hangs in the worker times out, and the next one is served", "[gpu_pool]") {
  fixture f("fake_gpu_worker");
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  auto hanging = small_review(13, 0.5);
  hanging.cand.source = "hang";
  caf::scoped_actor self{f.sys};
  self->request(f.pool, 60s, hanging)
      .receive(
          [&](review_result& r) {
            CHECK(r.status == review_status::timed_out);
            CHECK_THAT(r.message, Catch::Matchers::Contains("killed and restarted"));
          },
          [&](caf::error& err) { FAIL(f.sys.render(err)); });
  CHECK_FALSE(process_exists(first));
  self->request(f.pool, 60s, small_review(14))
      .receive([&](review_result& r) { CHECK(r.status == review_status::internal_error); },
               [&](caf::error& err) { FAIL(f.sys.render(err)); });
}

TEST_CASE("the pool keeps no thread alive once its actor system ends", "[gpu_pool]") {
  // Every request the pool makes leaves a timeout on CAF's clock; the pool must not
  // hold its detached thread (and the actor system's destructor) hostage to them.
  auto start = std::chrono::steady_clock::now();
  {
    fixture f;
    caf::scoped_actor self{f.sys};
    self->request(f.pool, 60s, small_review(1, 120))
        .receive([&](review_result&) {}, [&](caf::error& err) { FAIL(f.sys.render(err)); });
    f.describe();
  }
  CHECK(std::chrono::steady_clock::now() - start < 30s);
}

TEST_CASE("a worker that cannot start is reported, not hung on", "[gpu_pool]") {
  pool_config cfg;
  caf::actor_system sys{cfg};
  gpu_pool_options opts;
  opts.worker.binary = "/nonexistent/kernelskill-gpu";
  auto pool = sys.spawn<caf::detached>(gpu_pool, opts);
  caf::scoped_actor self{sys};
  self->request(pool, 30s, small_review(1))
      .receive(
          [&](review_result& r) {
            CHECK(r.status == review_status::internal_error);
            CHECK(r.message.find("cannot be started") != std::string::npos);
            CHECK(r.message.find("/nonexistent/kernelskill-gpu") != std::string::npos);
          },
          [&](caf::error& err) { FAIL(sys.render(err)); });
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

// ===========================================================================
// GPU: real candidates that fault, trap and hang, through the pool.

namespace {

const char* kReluTask = R"(
name: relu_pool_test
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [1023, 1031], init: {kind: normal, mean: 0, std: 1}}
seed: 3
)";

const char* kReluPlan = R"(
constants:
  N: x.numel
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - kernel: k
    grid: [ceil_div(N, 256)]
    block: [256]
    args: [x, y, {int64: N}]
)";

review_request relu_review(uint64_t id, const std::string& body, double timeout_s) {
  auto task = parse_task(kReluTask, "<pool test task>", ".");
  REQUIRE(task.ok());
  auto plan = parse_launch_plan(kReluPlan, "<pool test plan>");
  REQUIRE(plan.ok());
  review_request r;
  r.request_id = id;
  r.task = *task;
  r.cand.id = "relu" + std::to_string(id);
  r.cand.task = task->name;
  r.cand.plan = *plan;
  r.cand.source =
      "extern \"C\" __global__ void k(const float* __restrict__ x, float* __restrict__ y, long long n) {\n"
      "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n" +
      body + "\n}\n";
  r.options.timeout_s = timeout_s;
  r.options.trials = 2;
  r.options.time = false;
  return r;
}

}  // namespace

TEST_CASE("gpu: faulting, trapping and hanging candidates are isolated, and the pool goes on", "[gpu_pool][gpu]") {
  fixture f;
  auto info = f.describe();
  if (info.devices.empty())
    KS_SKIP("the worker has no GPU here (" << info.driver_error << "); this test runs on the GPU machine");
  const std::string good = "  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];";
  auto pid_now = [&] { return f.describe().pid; };

  auto ok = review(f, relu_review(1, good, 120));
  CHECK(ok.status == review_status::ok);

  auto before = pid_now();
  auto fault = review(f, relu_review(2, "  if (i < n) y[i + (1ll << 40)] = 1.f;", 120));
  CHECK(fault.status == review_status::crashed);
  CHECK_THAT(fault.message, Catch::Matchers::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK(pid_now() != before);  // replaced: its context was poisoned

  before = pid_now();
  auto trap =
      review(f, relu_review(3, "  if (i == 12345) __trap();\n  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];", 120));
  CHECK(trap.status == review_status::crashed);
  CHECK_THAT(trap.message, Catch::Matchers::Contains("CUDA_ERROR_"));
  CHECK(pid_now() != before);

  before = pid_now();
  const auto start = std::chrono::steady_clock::now();
  // One thread spins on the clock forever; the kernel never ends.
  auto hang = review(f, relu_review(4, "  if (i == 0) { while (clock64() >= 0) {} }\n  if (i < n) y[i] = x[i];", 5));
  CHECK(hang.status == review_status::timed_out);
  CHECK_THAT(hang.message, Catch::Matchers::Contains("killed and restarted"));
  CHECK(std::chrono::steady_clock::now() - start < 60s);
  CHECK_FALSE(process_exists(before));

  auto again = review(f, relu_review(5, good, 120));
  CHECK(again.status == review_status::ok);
}

// Issue 44: the real worker killed (SIGKILL) and stopped (SIGSTOP) while a correct
// kernel is under review. Neither is the candidate's doing: the review runs again on
// a fresh worker and the candidate gets its own verdict, ok.
TEST_CASE(
    "gpu: a real worker killed or stopped mid-review is replaced, and the review runs again with "
    "the candidate's own verdict",
    "[gpu_pool][gpu][supervision]") {
  fixture f("kernelskill-gpu", /*stopped_limit_s=*/2);
  auto info = f.describe();
  if (info.devices.empty())
    KS_SKIP("the worker has no GPU here (" << info.driver_error << "); this test runs on the GPU machine");
  // Correct, and slow: thread 0 spins about a second per launch, so that the review
  // is still running when the worker is killed or stopped.
  const std::string slow_good =
      "  if (i == 0) { const long long t0 = clock64(); while (clock64() - t0 < 2000000000ll) {} }\n"
      "  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];";
  caf::scoped_actor self{f.sys};
  auto run_and = [&](uint64_t id, const std::function<void(pid_t)>& fault) {
    const pid_t worker = f.describe().pid;
    REQUIRE(worker > 0);
    review_result out;
    auto pending = self->request(f.pool, 300s, relu_review(id, slow_good, 120));
    std::this_thread::sleep_for(1500ms);
    fault(worker);
    std::move(pending).receive([&](review_result& r) { out = std::move(r); },
                               [&](caf::error& err) { FAIL("review failed: " << f.sys.render(err)); });
    std::printf("review %llu: %s: %s\n", static_cast<unsigned long long>(id), to_string(out.status),
                out.message.c_str());
    CHECK_FALSE(process_exists(worker));
    CHECK(f.describe().pid != worker);
    return out;
  };
  auto killed = run_and(1, [](pid_t p) { ::kill(p, SIGKILL); });
  CHECK(killed.status == review_status::ok);
  auto stopped = run_and(2, [](pid_t p) { stop_process(p); });
  CHECK(stopped.status == review_status::ok);
}

// ===========================================================================
// The node agent on this machine's GPUs, reached as a daemon reaches another machine.

namespace {

// `kernelskill-gpu --listen 127.0.0.1:0` (the node agent), SIGKILLed at the end.
struct agent_process {
  ks::testing::started_server server;
  std::string log =
      (std::filesystem::temp_directory_path() / ("ks-agent-" + std::to_string(::getpid()) + ".log")).string();
  agent_process() {
    server = ks::testing::start_server(
        {std::string(KS_BINARY_DIR) + "/bin/kernelskill-gpu", "--listen", "127.0.0.1:0", "--review-margin", "1"},
        ks::testing::environment_without({}), log, 120);
  }
  ~agent_process() {
    stop();
    std::filesystem::remove(log);
  }
  // Before KS_SKIP, which may leave the process with std::exit (no destructors).
  void stop() {
    if (server.pid <= 0) return;
    ::kill(server.pid, SIGKILL);  // its workers die with it (PR_SET_PDEATHSIG)
    ::waitpid(server.pid, nullptr, 0);
    server.pid = -1;
  }
  uint16_t port() const {
    return static_cast<uint16_t>(std::stoi(server.address.substr(server.address.rfind(':') + 1)));
  }
};

}  // namespace

TEST_CASE("a node agent on a machine without a GPU says why it has no device", "[gpu_pool][nogpu]") {
  agent_process agent;
  REQUIRE(agent.server.pid > 0);
  pool_config cfg;
  caf::actor_system sys{cfg};
  auto link = open_node_link(sys, "127.0.0.1", agent.port(), "", 30);
  REQUIRE(link.ok());
  if (!link->info.devices.empty()) {
    agent.stop();
    KS_SKIP("this machine has a GPU: the no-GPU answer is not exercised here");
  }
  CHECK(link->info.pid == agent.server.pid);
  CHECK_THAT(link->info.driver_error, Catch::Matchers::Contains("no CUDA driver"));
}

TEST_CASE(
    "gpu: a node agent serves each GPU with a worker of its own, and isolates faulting and hanging "
    "candidates like a local pool",
    "[gpu_pool][gpu]") {
  agent_process agent;
  REQUIRE(agent.server.pid > 0);
  pool_config cfg;
  caf::actor_system sys{cfg};
  auto link = open_node_link(sys, "127.0.0.1", agent.port(), "", 60);
  REQUIRE(link.ok());
  if (link->info.devices.empty()) {
    agent.stop();
    KS_SKIP("the node has no GPU here (" << link->info.driver_error << "); this test runs on the GPU machine");
  }
  CHECK(link->info.driver_error.empty());
  for (const auto& d : link->info.devices) CHECK(d.cc_major >= 7);
  remote_pool_options ro;
  ro.host = "127.0.0.1";
  ro.port = agent.port();
  ro.device = link->info.devices.front().ordinal;
  auto pool = spawn_remote_pool(sys, ro);
  auto ask = [&](const review_request& req) {
    caf::scoped_actor self{sys};
    review_result out;
    self->request(pool, 300s, req)
        .receive([&](review_result& r) { out = std::move(r); },
                 [&](caf::error& err) { FAIL("a node fault: " << sys.render(err)); });
    std::printf("review %llu: %s: %s\n", static_cast<unsigned long long>(req.request_id), to_string(out.status),
                out.message.c_str());
    return out;
  };
  const std::string good = "  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];";
  CHECK(ask(relu_review(1, good, 120)).status == review_status::ok);
  auto fault = ask(relu_review(2, "  if (i < n) y[i + (1ll << 40)] = 1.f;", 120));
  CHECK(fault.status == review_status::crashed);
  CHECK_THAT(fault.message, Catch::Matchers::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
  auto hang = ask(relu_review(3, "  if (i == 0) { while (clock64() >= 0) {} }\n  if (i < n) y[i] = x[i];", 5));
  CHECK(hang.status == review_status::timed_out);
  CHECK(ask(relu_review(4, good, 120)).status == review_status::ok);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}
