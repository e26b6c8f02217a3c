// ks-store-fault-sweep: the long run of store_fault_test's sweep (tests/support/store_fault.hpp):
// many stores built by writers killed with SIGKILL, each damaged at random in many copies
// (MANIFEST, write-ahead log, tables, CURRENT, the watermark: cut, flipped, zeroed,
// removed) and reopened in a real process. Prints a table of outcomes per damaged file and
// every failure (an acknowledged write missing, a refusal that changed files or does not
// name the damage, a crash); exits 1 when there is one.
//
//   ks-store-fault-sweep [--seed N] [--bases N] [--per-base N] [--sync] [--work DIR]
//                        [--writer PATH] [--verbose]

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <random>

#include <CLI/CLI.hpp>

#include "tests/support/store_fault.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ks-store-fault-sweep: damage stores at random and reopen them; count what happens"};
  ks::test::fault_options o;
  o.seed = 1;
  o.bases = 40;
  o.damages_per_base = 25;
  std::string work;
  bool verbose = false;
  o.writer = std::string(KS_BINARY_DIR) + "/bin/store_writer";
  app.add_option("--seed", o.seed, "Random seed (default 1)");
  app.add_option("--bases", o.bases, "Stores built by killed writers (default 40)");
  app.add_option("--per-base", o.damages_per_base, "Damaged copies of each store (default 25)");
  app.add_flag("--sync", o.sync, "Writers fsync every write (the store's default; slower to build)");
  app.add_option("--work", work, "Scratch directory (default a new one under $TMPDIR)");
  app.add_option("--writer", o.writer, "store_writer to run (default the build's)");
  app.add_flag("--verbose", verbose, "One line per case");
  CLI11_PARSE(app, argc, argv);
  std::random_device rd;
  o.work = work.empty() ? std::filesystem::temp_directory_path() /
                              ("ks-store-fault-sweep-" + std::to_string(::getpid()) + "-" + std::to_string(rd()))
                        : std::filesystem::path(work);
  if (verbose) o.progress = [](const std::string& line) { std::cout << line << "\n" << std::flush; };

  auto s = ks::test::run_fault_sweep(o);
  std::error_code ec;
  if (work.empty()) std::filesystem::remove_all(o.work, ec);

  std::map<std::string, std::map<std::string, int>> by_op;
  std::vector<double> open_ms;
  for (const auto& c : s.cases) {
    ++by_op[c.op][c.outcome];
    open_ms.push_back(c.open_ms);
  }
  std::sort(open_ms.begin(), open_ms.end());
  std::cout << "ks-store-fault-sweep: seed " << o.seed << ", " << s.cases.size() << " damaged copies of " << o.bases
            << " stores (" << s.acked_writes << " acknowledged appends, writers " << (o.sync ? "synced" : "not synced")
            << "), " << s.seconds << " s\n\n"
            << s.table() << "\n| damage | intact | refused | failures |\n|---|---|---|---|\n";
  for (const auto& [op, by] : by_op) {
    int bad = 0;
    for (const auto& [outcome, n] : by)
      if (outcome != "intact" && outcome != "refused") bad += n;
    auto get = [&](const char* k) {
      auto it = by.find(k);
      return it == by.end() ? 0 : it->second;
    };
    std::cout << "| " << op << " | " << get("intact") << " | " << get("refused") << " | " << bad << " |\n";
  }
  if (!open_ms.empty()) {
    std::cout << "\nreopen process (start, checks, verify): median " << open_ms[open_ms.size() / 2] << " ms, p99 "
              << open_ms[open_ms.size() * 99 / 100] << " ms\n";
  }
  auto failures = s.failures();
  for (const auto* f : failures) std::cout << "\nFAILURE " << f->describe() << "\n" << f->detail;
  std::cout << "\n" << failures.size() << " failure(s)\n";
  return failures.empty() ? 0 : 1;
}
