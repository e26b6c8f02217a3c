// store_writer: the victim of store_test's crash test and of store_fault_test. It opens a
// memory store and appends to it in a tight loop, acknowledging each write on stdout only
// after the store call returned, until it is killed:
//
//   store_writer DIR [--no-sync] [--task NAME] [--count N]
//       ack SEQ          a trajectory entry, stored
//       kernel ID        a candidate, stored (every 10th append)
//       experience N     an experience record, stored (every 25th append)
//   store_writer DIR --open-only
//       opens the store, prints "opened" and exits 0; or prints the error, exits 3
//   store_writer DIR --verify TRANSCRIPT [--task NAME]
//       opens the store for writing (as the daemon does) and checks that everything a
//       writer acknowledged in TRANSCRIPT (its stdout) is there: "verified N" and exit 0;
//       "LOST: ..." and exit 4; "refused: MESSAGE" and exit 3 when the open refuses.
//
// The tests kill it with SIGKILL at a random point and then check that everything
// acknowledged is in the store (or that the store refuses to open, saying why).
// Stores are synced (the default); --no-sync turns that off, --sync is accepted for the
// old command lines.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "store/store.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: store_writer DIR [--sync|--no-sync] [--task NAME] [--count N] "
               "[--open-only | --verify TRANSCRIPT]\n");
  return 2;
}

// Everything TRANSCRIPT acknowledged must be in the store.
int verify(ks::store& db, const std::string& task, const std::string& transcript) {
  std::ifstream in(transcript);
  if (!in) {
    std::printf("error: cannot read %s\n", transcript.c_str());
    return 2;
  }
  unsigned long long max_ack = 0, experiences = 0;
  std::set<std::string> kernels;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ack ", 0) == 0) max_ack = std::max(max_ack, std::strtoull(line.c_str() + 4, nullptr, 10));
    if (line.rfind("kernel ", 0) == 0) kernels.insert(line.substr(7));
    if (line.rfind("experience ", 0) == 0) ++experiences;
  }
  auto entries = db.read_trajectory(task);
  if (!entries) {
    std::printf("LOST: the trajectory cannot be read: %s\n", entries.message().c_str());
    return 4;
  }
  if (entries->size() < max_ack) {
    std::printf("LOST: %llu trajectory entries acknowledged, %zu in the store\n", max_ack, entries->size());
    return 4;
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    if ((*entries)[i].seq != i + 1) {
      std::printf("LOST: trajectory entry %zu is missing (found %llu there)\n", i + 1,
                  static_cast<unsigned long long>((*entries)[i].seq));
      return 4;
    }
  }
  for (const auto& id : kernels) {
    if (auto k = db.get_kernel(id); !k) {
      std::printf("LOST: kernel %s: %s\n", id.c_str(), k.message().c_str());
      return 4;
    }
  }
  auto exp = db.read_experience("vectorize_loads");
  if (!exp || exp->size() < experiences) {
    std::printf("LOST: %llu experience records acknowledged, %zu in the store\n", experiences,
                exp ? exp->size() : size_t{0});
    return 4;
  }
  std::printf("verified %llu\n", max_ack);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string dir = argv[1];
  ks::store_options options;
  std::string task = "crash-task";
  bool open_only = false;
  std::string transcript;
  unsigned long long count = 0;  // 0: until killed
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sync") {
      options.sync_writes = true;
    } else if (a == "--no-sync") {
      options.sync_writes = false;
    } else if (a == "--verify" && i + 1 < argc) {
      transcript = argv[++i];
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
    std::printf("%s: %s\n", transcript.empty() ? "error" : "refused", opened.message().c_str());
    std::fflush(stdout);
    return 3;
  }
  auto& db = *opened;
  if (!transcript.empty()) return verify(*db, task, transcript);
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
      c.plan.steps.push_back({"kernel", "k", {"1", "1", "1"}, {"32", "1", "1"}, "0", {{"tensor", "x", ""}}, {}, {}});
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
