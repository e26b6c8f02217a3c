// `kernelskill trajectory TASK`: a task's short-term memory as a readable timeline.

#include <cstdio>
#include <ctime>
#include <iostream>

#include "cli/commands.hpp"
#include "memory/store.hpp"

namespace ks::cli {

namespace {

std::string clock_time(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

result<std::unique_ptr<store>> open_store_for_reading(const std::string& memory_path) {
  store_options so;
  so.read_only = true;
  so.create_if_missing = false;
  return store::open(memory_path, so);
}

int show_trajectory(const std::string& memory_path, const std::string& task) {
  auto db = open_store_for_reading(memory_path);
  if (!db) {
    std::cerr << db.message() << "\n";
    return 1;
  }
  if (task.empty()) {
    auto tasks = (*db)->list_trajectory_tasks();
    if (!tasks) {
      std::cerr << tasks.message() << "\n";
      return 1;
    }
    for (auto& t : *tasks) std::printf("%s\n", t.c_str());
    return 0;
  }
  auto entries = (*db)->read_trajectory(task);
  if (!entries) {
    std::cerr << entries.message() << "\n";
    return 1;
  }
  if (entries->empty()) {
    std::cerr << "kernelskill: no trajectory for task '" << task << "' in " << memory_path
              << " (`kernelskill trajectory --memory " << memory_path << "` lists the tasks)\n";
    return 1;
  }
  std::printf("trajectory of %s (%zu entries)\n", task.c_str(), entries->size());
  uint32_t round = UINT32_MAX;
  for (auto& e : *entries) {
    if (e.round != round) {
      round = e.round;
      std::printf("round %u\n", round);
    }
    std::string what = e.kind;
    if (!e.method.empty()) what += " " + e.method;
    std::string cand = e.candidate_id.empty() ? "" : e.candidate_id.substr(0, 8);
    if (!e.parent_id.empty()) cand += " <- " + e.parent_id.substr(0, 8);
    std::printf("  #%-4llu %s  %-26s %-20s", static_cast<unsigned long long>(e.seq),
                clock_time(e.unix_ms).c_str(), what.c_str(), cand.c_str());
    if (e.kind == "review")
      std::printf(" %-14s speedup %.3fx", to_string(e.status), e.speedup);
    std::printf("\n");
    if (!e.summary.empty()) std::printf("        %s\n", e.summary.c_str());
  }
  return 0;
}

}  // namespace ks::cli
