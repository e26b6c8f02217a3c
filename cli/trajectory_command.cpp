// `kernelskill trajectory TASK`: a task's short-term memory as a readable timeline.

#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "report/trajectory_timeline.hpp"
#include "store/store.hpp"

namespace ks::cli {

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
  std::fputs(render_trajectory(task, *entries).c_str(), stdout);
  return 0;
}

}  // namespace ks::cli
