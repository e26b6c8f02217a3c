// `kernelskill devices` and `kernelskill run`: the commands that need GPU workers.

#include <cstdio>
#include <iostream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "actors/gpu_nodes.hpp"
#include "base/logging.hpp"
#include "cli/commands.hpp"
#include "config/experiment_config.hpp"
#include "task/task_loader.hpp"

namespace ks::cli {

namespace {

struct daemon_system_config : caf::actor_system_config {
  daemon_system_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
  }
};

// Loads the config (or the defaults when path is empty) and sets up logging from it,
// --log-level taking precedence. Prints the error and returns nothing on failure.
result<experiment_config> load_for_command(const std::string& path, const global_options& g) {
  experiment_config cfg;
  if (!path.empty()) {
    auto loaded = load_config(path);
    if (!loaded) return loaded;
    cfg = std::move(*loaded);
  }
  auto level = g.log_level.empty() ? cfg.logging.level : g.log_level;
  if (auto s = setup_logging(level, cfg.logging.file); !s) return ks::error{s.message()};
  return cfg;
}

void print_nodes(const gpu_discovery& found) {
  for (auto& node : found.nodes)
    for (auto& d : node.info.devices)
      std::printf("%s (%s): gpu %d: %s, compute capability %d.%d, %.1f GiB, %d SMs\n",
                  node.name.c_str(), node.info.host.c_str(), d.ordinal, d.name.c_str(),
                  d.cc_major, d.cc_minor, d.total_memory_bytes / 1073741824.0, d.multiprocessors);
}

}  // namespace

int list_devices(const std::string& config_path, const global_options& g) {
  auto cfg = load_for_command(config_path, g);
  if (!cfg) {
    std::cerr << cfg.message() << "\n";
    return 1;
  }
  daemon_system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  auto found = discover_gpus(sys, cfg->gpus);
  print_nodes(found);
  for (auto& p : found.problems) std::cerr << "kernelskill: " << p << "\n";
  return found.device_count() > 0 ? 0 : 3;
}

int run_experiment(const std::string& config_path, const global_options& g) {
  auto cfg = load_for_command(config_path, g);
  if (!cfg) {
    std::cerr << cfg.message() << "\n";
    return 1;
  }
  std::vector<task_spec> tasks;
  for (auto& path : cfg->tasks) {
    auto task = load_task(path);
    if (task && !cfg->review.size.empty()) task = with_size(*task, cfg->review.size);
    if (!task) {
      std::cerr << task.message() << "\n";
      return 1;
    }
    tasks.push_back(std::move(*task));
  }
  if (tasks.empty()) {
    std::cerr << config_path << ": the config names no tasks (add them under `tasks:`)\n";
    return 1;
  }
  spdlog::info("experiment '{}': {} tasks, coder {}, {} rounds", cfg->name, tasks.size(),
               cfg->coder.backend, cfg->budgets.rounds);
  daemon_system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  auto found = discover_gpus(sys, cfg->gpus);
  if (found.device_count() == 0) {
    std::cerr << "kernelskill run: " << no_gpu_message(found) << "\n";
    return 3;
  }
  print_nodes(found);
  for (auto& p : found.problems) spdlog::warn("{}", p);
  // The optimisation loop (generator → reviewer → planner → optimizer) plugs in here.
  std::cerr << "kernelskill run: the tasks and " << found.device_count()
            << " GPU(s) are ready, but this build has no optimisation loop yet; "
               "nothing was optimised.\n";
  return 4;
}

}  // namespace ks::cli
