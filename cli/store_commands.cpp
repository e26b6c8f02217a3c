// `kernelskill store check | repair`: look at a memory store, and salvage a damaged one
// (store/store_check.hpp; docs/store.md, "Damage"). The daemon refuses to start on a
// damaged store and names these commands.

#include <cstdint>
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "daemon/task_queue.hpp"
#include "store/store.hpp"
#include "store/store_check.hpp"

namespace ks::cli {

namespace {

// The daemon's view of a repaired store: tasks present, tasks whose spec is gone, task
// numbers handed out that have no task, and the ids of lost tasks that other records
// (specs, results, checkpoints, trajectories) still name.
void audit_tasks(const std::string& memory_path, bool complete) {
  auto db = store::open(memory_path);
  if (!db) {
    std::printf("  tasks: the repaired store does not open: %s\n", db.message().c_str());
    return;
  }
  std::shared_ptr<store> shared = std::move(*db);
  auto q = task_queue::open(shared);
  if (!q) {
    std::printf("  tasks: the task queue cannot be read: %s\n", q.message().c_str());
    return;
  }
  size_t total = 0;
  auto all = (*q)->list(std::nullopt, SIZE_MAX, &total);
  if (!all) {
    std::printf("  tasks: %s\n", all.message().c_str());
    return;
  }
  size_t no_spec = 0;
  for (const auto& t : *all) {
    if (!(*q)->spec(t.id)) {
      ++no_spec;
      std::printf("  task %s: its spec (the submitted task) was not recovered\n", t.id.c_str());
    }
  }
  std::printf("  daemon tasks: %zu recovered%s\n", total,
              no_spec ? (", " + std::to_string(no_spec) + " without their spec").c_str() : "");
  auto lost = find_lost_tasks(*shared);
  if (!lost) {
    std::printf("  lost tasks: %s\n", lost.message().c_str());
    return;
  }
  for (const auto& [id, what] : lost->named)
    std::printf("  task %s: LOST (its records are gone; still named by its %s)\n", id.c_str(), what.c_str());
  if (!lost->missing.empty()) {
    std::string ranges;
    uint64_t count = 0;
    for (const auto& [from, to] : lost->missing) {
      if (!ranges.empty()) ranges += ", ";
      ranges += std::to_string(from);
      if (to > from) {
        ranges += '-';
        ranges += std::to_string(to);
      }
      count += to - from + 1;
    }
    std::printf(
        "  task numbers with no task: %s (%llu: lost with the damage, or submits that never "
        "answered)%s\n",
        ranges.c_str(), static_cast<unsigned long long>(count),
        lost->named.empty() ? "; no record that is left names their ids: the daemon's log does "
                              "(\"task 'ID': queued\")"
                            : "");
  }
  // The counter of task numbers is a record like the others: what it says may be as
  // old as the damage, so later numbers may be lost whatever it says.
  if (!complete && lost->last_found > 0) {
    std::printf(
        "  the last recovered task is number %llu: tasks submitted after it may be lost "
        "(not everything acknowledged could be read)\n",
        static_cast<unsigned long long>(lost->last_found));
  }
  if (uint64_t floor = shared->writes_before_repair()) {
    std::printf("  new task numbers start above %llu: none handed out before is reused\n",
                static_cast<unsigned long long>(floor));
  }
}

}  // namespace

result<std::string> store_path(const std::string& memory_path, const std::string& config_path,
                               const global_options& g) {
  if (!memory_path.empty()) return memory_path;
  if (config_path.empty()) return error{"name the store: --memory DIR, or --config C (its memory.path)"};
  auto cfg = load_for_command(config_path, g);
  if (!cfg) return cfg.error();
  return cfg->memory.path;
}

int store_check(const std::string& memory_path) {
  auto r = check_store(memory_path);
  if (!r) {
    std::cerr << "kernelskill store check: " << r.message() << "\n";
    return 1;
  }
  std::printf("memory store %s\n", memory_path.c_str());
  for (const auto& l : r->lines) std::printf("  %s\n", l.c_str());
  if (r->healthy) {
    std::printf("healthy\n");
    return 0;
  }
  std::printf("DAMAGED: %s\n", r->verdict.empty() ? "a table's checksums do not match" : r->verdict.c_str());
  std::printf(
      "`kernelskill store repair --memory %s` salvages what can be read into a new store and "
      "keeps the damaged one; or restore the directory from a backup\n",
      memory_path.c_str());
  return 1;
}

int store_repair(const std::string& memory_path) {
  auto r = repair_store(memory_path);
  if (!r) {
    std::cerr << "kernelskill store repair: " << r.message() << "\n";
    return 1;
  }
  std::printf("memory store %s repaired; the damaged store is kept, untouched, in %s\n", memory_path.c_str(),
              r->kept.c_str());
  std::printf("recovered:\n");
  for (const auto& l : r->recovered) std::printf("  %s\n", l.c_str());
  audit_tasks(memory_path, r->complete);
  if (r->acked_before > 0) {
    std::printf("writes acknowledged before: up to %llu; the salvage reached %llu\n",
                static_cast<unsigned long long>(r->acked_before), static_cast<unsigned long long>(r->reached));
  }
  if (r->complete) {
    std::printf("nothing acknowledged is missing\n");
    return 0;
  }
  std::printf("NOT RECOVERED (%zu):\n", r->not_recovered.size());
  for (const auto& l : r->not_recovered) std::printf("  %s\n", l.c_str());
  return 5;
}

}  // namespace ks::cli
