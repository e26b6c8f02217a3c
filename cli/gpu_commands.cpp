// `kernelskill devices` and `kernelskill run`: the commands that need GPU workers.

#include <cstdio>
#include <iostream>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/agents.hpp"
#include "actors/experiment_runner.hpp"
#include "base/private_dir.hpp"
#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "config/experiment_config.hpp"
#include "fleet/gpu_nodes.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "policy/skill_library.hpp"
#include "report/run_report.hpp"
#include "store/store.hpp"
#include "task/task_loader.hpp"

namespace ks::cli {

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

namespace {

std::string progress_line(const task_progress& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%s] %-10s round %2u  reviews %3u  best %s", p.task.c_str(), p.state.c_str(), p.round,
                p.reviews, p.best_speedup > 0 ? (std::to_string(p.best_speedup).substr(0, 5) + "x").c_str() : "-");
  std::string line = buf;
  if (!p.detail.empty()) line += "  " + p.detail;
  return line;
}

}  // namespace

experiment_result run_tasks(const experiment_config& cfg, const std::vector<task_spec>& tasks, const run_hooks& hooks) {
  experiment_result out;
  const std::string who = hooks.who.empty() ? "kernelskill run" : hooks.who;
  auto fail = [&](int status, const std::string& message) {
    std::cerr << message << "\n";
    out.status = status;
    return out;
  };
  auto lib = load_skill_library(KS_DEFAULT_SKILLS_DIR);
  if (!lib) return fail(1, lib.message());
  auto library = std::make_shared<const skill_library>(std::move(*lib));
  spdlog::info("experiment '{}': {} tasks, coder {}, {} seeds, {} rounds", cfg.name, tasks.size(), cfg.coder.backend,
               cfg.budgets.seeds, cfg.budgets.rounds);
  daemon_system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  auto found = discover_gpus(sys, cfg.gpus);
  if (found.device_count() == 0) return fail(3, who + ": " + no_gpu_message(found));
  print_nodes(found);
  for (auto& p : found.problems) spdlog::warn("{}", p);
  auto backend = make_backend(cfg, library, lowering_device_for(found));
  if (!backend) return fail(1, who + ": " + backend.message());

  auto db = store::open(cfg.memory.path);
  if (!db) return fail(1, who + ": " + db.message());
  std::shared_ptr<store> memory = std::move(*db);
  // Children's scratch beside the store, cleared of what a killed run left.
  auto swept = use_scratch_root(std::filesystem::path(cfg.memory.path) / "scratch");
  if (!swept) return fail(1, who + ": " + swept.message());
  if (auto s = memory->install_skill_library(static_cast<uint32_t>(library->version), library_hash(*library),
                                             to_store_docs(*library));
      !s)
    return fail(1, who + ": " + s.message());

  auto fleet = start_fleet(sys, cfg, found);

  experiment_options eo;
  eo.name = cfg.name;
  eo.tasks = tasks;
  eo.tasks_in_flight = static_cast<uint32_t>(cfg.budgets.tasks_in_flight);
  eo.output_dir = cfg.output.dir;
  eo.devices = static_cast<uint32_t>(fleet.pools.size());
  eo.base = coordinator_options_from(cfg);
  eo.base.resume = hooks.resume;
  eo.base.backend = backend->code;
  eo.base.model = backend->model;
  eo.base.usage = backend->usage;
  eo.base.library = library;
  eo.base.memory = memory;
  eo.base.compiler = std::make_shared<nvrtc_compiler>();
  const std::string prefix = hooks.progress_prefix;
  eo.on_progress = [prefix](const task_progress& p) {
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), progress_line(p).c_str());
  };
  out.summary = ks::run_experiment(sys, eo, fleet.reviewer);
  fleet.stop();
  return out;
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
  auto ran = run_tasks(*cfg, tasks, {});
  if (ran.status != 0) return ran.status;
  const run_summary& summary = ran.summary;
  std::fputs(summary_markdown(summary).c_str(), stdout);
  std::fprintf(stderr, "kernelskill run: results in %s (summary.md, summary.json, tasks/)\n", cfg->output.dir.c_str());
  for (const auto& o : summary.outcomes)
    if (!o.success) return 5;
  return 0;
}

}  // namespace ks::cli
