// store_writer: the victim of store_test's crash test. It opens a memory store and
// appends to it in a tight loop, acknowledging each write on stdout only after the
// store call returned, until it is killed:
//
//   store_writer DIR [--sync] [--task NAME] [--count N]
//       ack SEQ          a trajectory entry, stored
//       kernel ID        a candidate, stored (every 10th append)
//       experience N     an experience record, stored (every 25th append)
//   store_writer DIR --open-only
//       opens the store, prints "opened" and exits 0; or prints the error, exits 3
//
// The test kills it with SIGKILL at a random point and then checks that everything
// acknowledged is in the store.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "memory/store.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: store_writer DIR [--sync] [--task NAME] [--count N] [--open-only]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string dir = argv[1];
  ks::store_options options;
  std::string task = "crash-task";
  bool open_only = false;
  unsigned long long count = 0;  // 0: until killed
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sync") {
      options.sync_writes = true;
    } else if (a == "--open-only") {
      open_only = true;
    } else if (a == "--task" && i + 1 < argc) {
      task = argv[++i];
    } else if (a == "--count" && i + 1 < argc) {
      count = std::strtoull(argv[++i], nullptr, 10);
    } else {
      return usage();
    }
  }

  auto opened = ks::store::open(dir, options);
  if (!opened) {
    std::printf("error: %s\n", opened.message().c_str());
    std::fflush(stdout);
    return 3;
  }
  auto& db = *opened;
  std::printf("opened\n");
  std::fflush(stdout);
  if (open_only) return 0;

  for (unsigned long long n = 1; count == 0 || n <= count; ++n) {
    ks::trajectory_entry e;
    e.round = uint32_t(n % 15);
    e.kind = "review";
    e.candidate_id = "cand" + std::to_string(n);
    e.method = "vectorize_loads";
    e.status = n % 3 == 0 ? ks::review_status::incorrect : ks::review_status::ok;
    e.speedup = 1.0 + double(n % 100) / 100.0;
    e.summary = "append " + std::to_string(n) + " of this writer";
    e.metrics = {{"n", double(n)}, {"dram_throughput_pct", 91.5}, {"never", NAN}};
    auto seq = db->append_trajectory(task, e);
    if (!seq) {
      std::printf("error: %s\n", seq.message().c_str());
      return 1;
    }
    std::printf("ack %llu\n", static_cast<unsigned long long>(*seq));
    std::fflush(stdout);

    if (n % 10 == 0) {
      ks::candidate c;
      c.task = task;
      c.source = "__global__ void k(float* x) { x[threadIdx.x] *= " + std::to_string(*seq) + "; }";
      c.compile_options = {"--use_fast_math"};
      c.plan.steps.push_back({"kernel", "k", {"1", "1", "1"}, {"32", "1", "1"}, "0",
                              {{"tensor", "x", ""}}, {}, {}});
      auto id = db->put_kernel(c);
      if (!id) {
        std::printf("error: %s\n", id.message().c_str());
        return 1;
      }
      std::printf("kernel %s\n", id->c_str());
      std::fflush(stdout);
    }
    if (n % 25 == 0) {
      ks::experience_record r;
      r.method = "vectorize_loads";
      r.bottleneck_class = "memory_bandwidth";
      r.structure_class = "streaming";
      r.task = task;
      r.skill_library_version = 1;
      r.speedup_before = 1.0;
      r.speedup_after = 1.5;
      r.correct = true;
      auto st = db->record_experience(r);
      if (!st) {
        std::printf("error: %s\n", st.message().c_str());
        return 1;
      }
      std::printf("experience %llu\n", n);
      std::fflush(stdout);
    }
  }
  return 0;
}
