// ks-store-sync-cost: what "acknowledged means synced" costs a store write, on the disk
// holding --dir. A daemon submit is three task records (counter, spec, task); this times
//   unsynced    three puts, sync_writes off (the store before issue 18)
//   synced      three puts, each fsync'ed (the daemon's submit today)
//   batched     one put_task_records of the three, one fsync
//   concurrent  synced three-put submits from --threads threads at once: RocksDB
//               commits concurrent writers' records in one group and one fsync
// and prints milliseconds per submit for each.
//
//   ks-store-sync-cost [--dir DIR] [--count N] [--threads T]

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "store/store.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json record(int i) { return json{{"schema", "ks.bench/1"}, {"i", i}, {"yaml", std::string(600, 'y')}}; }

// ms per submit of `count` submits done by `threads` threads.
double run(const fs::path& dir, bool sync, bool batched, int count, int threads) {
  fs::remove_all(dir);
  ks::store_options o;
  o.sync_writes = sync;
  auto s = ks::store::open(dir, o);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(1);
  }
  auto& db = **s;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = t; i < count; i += threads) {
        const std::string id = "x-" + std::to_string(i);
        bool ok;
        if (batched) {
          ok =
              db.put_task_records(
                    {{"counter/" + std::to_string(t), record(i)}, {"spec/" + id, record(i)}, {"task/" + id, record(i)}})
                  .ok();
        } else {
          ok = db.put_task_record("counter/" + std::to_string(t), record(i)).ok() &&
               db.put_task_record("spec/" + id, record(i)).ok() && db.put_task_record("task/" + id, record(i)).ok();
        }
        if (!ok) std::abort();
      }
    });
  }
  for (auto& th : pool) th.join();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s->reset();
  fs::remove_all(dir);
  return ms / count;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ks-store-sync-cost: the cost of synced store writes per daemon submit"};
  std::string dir;
  int count = 300, threads = 8;
  app.add_option("--dir", dir, "Where to put the scratch store (default $TMPDIR): the disk measured");
  app.add_option("--count", count, "Submits per measurement (default 300)");
  app.add_option("--threads", threads, "Threads for the concurrent case (default 8)");
  CLI11_PARSE(app, argc, argv);
  std::random_device rd;
  fs::path root = dir.empty() ? fs::temp_directory_path() : fs::path(dir);
  fs::path where = root / ("ks-store-sync-cost-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  std::printf("ks-store-sync-cost: %d submits (3 task records each) on %s\n", count, root.c_str());
  std::printf("unsynced    %.3f ms per submit\n", run(where, false, false, count, 1));
  std::printf("synced      %.3f ms per submit\n", run(where, true, false, count, 1));
  std::printf("batched     %.3f ms per submit\n", run(where, true, true, count, 1));
  std::printf("concurrent  %.3f ms per submit (%d threads, synced, three puts each)\n",
              run(where, true, false, count, threads), threads);
  return 0;
}
