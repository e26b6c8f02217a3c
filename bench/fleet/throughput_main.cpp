// ks-fleet-bench: reviews per second through the fleet with 1, 2, 4, … GPU nodes.
//
// Each node is the real node agent (`kernelskill-gpu --listen`) started as its own
// process on loopback, its worker the stand-in ks-scripted-gpu with a fixed review
// time (KS_SCRIPTED_REVIEW_MS; NVRTC skipped, so that the bench measures the fleet and
// not the compiler on a machine with few cores). The daemon side is the real fleet
// code: a remote pool per device and the review dispatcher, driven by a closed loop
// that keeps 2 reviews per node outstanding (the pools queue what their device is not
// yet reviewing). For each node count it prints the reviews per second and their ratio
// to N × one node's; the target is ≥ 0.9 for N = 2 and 4. Exit status 1 when a
// ratio misses --target.
//
//   ks-fleet-bench [--nodes 1,2,4] [--review-ms 250] [--reviews-per-node 40] [--target 0.9]

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "fleet/remote_pool.hpp"
#include "fleet/review_dispatcher.hpp"
#include "tests/support/node_process.hpp"

namespace {

using namespace ks;

struct bench_config : caf::actor_system_config {
  bench_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
  }
};

review_request bench_review(uint64_t id) {
  review_request r;
  r.request_id = id;
  r.task.name = "bench";
  r.task.torchscript = "def forward(x):\n    return x\n";
  r.task.inputs = {{"x", {8}, "float32", {}}};
  r.cand.id = "bench" + std::to_string(id);
  r.cand.source = "// verdict: ok\n";
  r.options.trials = 1;
  r.options.timeout_s = 60;
  return r;
}

struct loop_result {
  double seconds = 0;
  size_t ok = 0, other = 0, errors = 0;
};

// Keeps `in_flight` reviews outstanding until `total` are answered.
loop_result closed_loop(caf::actor_system& sys, const reviewer_actor& reviewer, size_t total, size_t in_flight,
                        uint64_t first_id) {
  auto done = std::make_shared<std::promise<loop_result>>();
  auto fut = done->get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    struct state {
      size_t sent = 0, answered = 0;
      loop_result r;
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    };
    auto st = std::make_shared<state>();
    auto send_one = std::make_shared<std::function<void()>>();
    *send_one = [=] {
      if (st->sent >= total) return;
      const uint64_t id = first_id + st->sent++;
      auto answered = [=] {
        if (++st->answered == total) {
          st->r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count();
          done->set_value(st->r);
          self->quit();
          return;
        }
        (*send_one)();
      };
      self->request(reviewer, caf::infinite, bench_review(id))
          .then(
              [=](review_result& r) {
                (r.status == review_status::ok ? st->r.ok : st->r.other) += 1;
                answered();
              },
              [=](caf::error&) {
                ++st->r.errors;
                answered();
              });
    };
    for (size_t i = 0; i < in_flight; ++i) (*send_one)();
  });
  return fut.get();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ks-fleet-bench: reviews per second through the fleet with N stand-in GPU nodes"};
  std::vector<int> counts = {1, 2, 4};
  int review_ms = 250;
  size_t per_node = 40;
  double target = 0.9;
  app.add_option("--nodes", counts, "Node counts to measure, comma-separated (default 1,2,4)")->delimiter(',');
  app.add_option("--review-ms", review_ms, "How long each stand-in review takes (default 250)");
  app.add_option("--reviews-per-node", per_node, "Reviews per node and count (default 40)");
  app.add_option("--target", target, "Least ratio to N x one node's (default 0.9)");
  CLI11_PARSE(app, argc, argv);

  bench_config cfg;
  caf::actor_system sys{cfg};
  double one = 0;
  bool met = true;
  uint64_t next_id = 1;
  std::printf("%5s %9s %9s %12s %10s\n", "nodes", "reviews", "seconds", "reviews/s", "vs N x 1");
  for (int n : counts) {
    std::vector<std::unique_ptr<ks::testing::node_process>> nodes;
    dispatcher_options o;
    for (int i = 0; i < n; ++i) {
      nodes.push_back(std::make_unique<ks::testing::node_process>(
          ks::testing::node_options{.review_ms = review_ms, .compile = false}));
      if (!nodes.back()->start()) {
        std::fprintf(stderr, "ks-fleet-bench: %s\n", nodes.back()->last_error().c_str());
        return 2;
      }
      remote_pool_options ro;
      ro.host = "127.0.0.1";
      ro.port = static_cast<uint16_t>(nodes.back()->port());
      o.pools.push_back({spawn_remote_pool(sys, ro), remote_device_name(ro), ""});
    }
    auto reviewer = spawn_review_dispatcher(sys, o);
    // Warm up: every node's link and worker, outside the measurement.
    auto warm = closed_loop(sys, reviewer, static_cast<size_t>(n), static_cast<size_t>(n), next_id);
    next_id += static_cast<uint64_t>(n);
    const size_t total = per_node * static_cast<size_t>(n);
    auto r = closed_loop(sys, reviewer, total, 2 * static_cast<size_t>(n), next_id);
    next_id += total;
    caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
    if (r.errors + r.other + warm.errors + warm.other > 0) {
      std::fprintf(stderr, "ks-fleet-bench: %zu errors, %zu reviews not ok\n", r.errors + warm.errors,
                   r.other + warm.other);
      return 2;
    }
    const double rps = static_cast<double>(total) / r.seconds;
    if (n == 1 || one == 0) one = rps / n;
    const double ratio = rps / (n * one);
    if (n > 1 && ratio < target) met = false;
    std::printf("%5d %9zu %9.2f %12.2f %10.3f\n", n, total, r.seconds, rps, ratio);
    std::fflush(stdout);
  }
  std::printf("ideal per node: %.2f reviews/s (one review every %d ms); target ratio %.2f: %s\n", 1000.0 / review_ms,
              review_ms, target, met ? "met" : "MISSED");
  return met ? 0 : 1;
}
