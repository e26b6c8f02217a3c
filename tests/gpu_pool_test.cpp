// The gpu pool actor with a real kernelskill-gpu process: crashes, hangs and kills are
// made for real (SIGKILL, SIGSTOP), and the pool must answer every request and go on
// with a fresh worker. Needs no GPU: the worker runs everywhere.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/gpu_pool.hpp"

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

  fixture() {
    gpu_pool_options opts;
    opts.worker.binary = std::string(KS_BINARY_DIR) + "/bin/kernelskill-gpu";
    opts.review_margin_s = 1.0;
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
        .receive([&](review_result& r) {
                   answered.push_back(r.request_id);
                   CHECK(r.status != review_status::timed_out);
                   CHECK(r.status != review_status::crashed);
                   CHECK_FALSE(r.message.empty());
                 },
                 [&](caf::error& err) { FAIL(f.sys.render(err)); });
  }
  CHECK(answered == std::vector<uint64_t>{1, 2, 3});
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

TEST_CASE("a hung review times out, and the worker is killed and replaced", "[gpu_pool]") {
  fixture f;
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  ::kill(first, SIGSTOP);  // a worker that never answers, like one stuck in a kernel
  caf::scoped_actor self{f.sys};
  auto start = std::chrono::steady_clock::now();
  self->request(f.pool, 60s, small_review(7, /*timeout_s=*/0.5))
      .receive(
          [&](review_result& r) {
            CHECK(r.request_id == 7);
            CHECK(r.status == review_status::timed_out);
            CHECK(r.message.find("killed and restarted") != std::string::npos);
          },
          [&](caf::error& err) { FAIL(f.sys.render(err)); });
  CHECK(std::chrono::steady_clock::now() - start < 20s);
  CHECK_FALSE(process_exists(first));
  auto second = f.describe().pid;
  CHECK(second > 0);
  CHECK(second != first);
}

TEST_CASE("a worker that dies during a review gives 'crashed', then a fresh worker",
          "[gpu_pool]") {
  fixture f;
  auto first = f.describe().pid;
  REQUIRE(first > 0);
  ::kill(first, SIGSTOP);
  caf::scoped_actor self{f.sys};
  auto pending = self->request(f.pool, 60s, small_review(9, 30));
  std::this_thread::sleep_for(300ms);
  ::kill(first, SIGKILL);
  std::move(pending).receive(
      [&](review_result& r) {
        CHECK(r.request_id == 9);
        CHECK(r.status == review_status::crashed);
      },
      [&](caf::error& err) { FAIL(f.sys.render(err)); });
  auto second = f.describe().pid;
  CHECK(second > 0);
  CHECK(second != first);
  // And the next review goes through normally.
  self->request(f.pool, 60s, small_review(10))
      .receive([&](review_result& r) { CHECK(r.status != review_status::crashed); },
               [&](caf::error& err) { FAIL(f.sys.render(err)); });
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
