// `kernelskill devices` and `kernelskill run`: the commands that need GPU workers.

#include <cstdio>
#include <iostream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "actors/agents.hpp"
#include "actors/experiment_runner.hpp"
#include "actors/gpu_nodes.hpp"
#include "actors/gpu_pool.hpp"
#include "base/logging.hpp"
#include "cli/commands.hpp"
#include "coder/llm_coder.hpp"
#include "coder/rules_coder.hpp"
#include "config/experiment_config.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "llm/llm_client.hpp"
#include "memory/skill_library.hpp"
#include "memory/store.hpp"
#include "report/run_report.hpp"
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

namespace {

// The coder backend the config asks for. The llm client is kept alive by the coder's
// chat function (it holds the shared pointer).
struct backend_choice {
  std::shared_ptr<coder> code;
  std::shared_ptr<llm_coder> model;   // set for the llm backend (the diagnoser uses it)
  std::shared_ptr<usage_ledger> usage;
};

result<backend_choice> make_backend(const experiment_config& cfg,
                                    std::shared_ptr<const skill_library> lib) {
  backend_choice b;
  if (cfg.coder.backend == "llm") {
    auto co = client_options(cfg);
    b.usage = std::make_shared<usage_ledger>();
    co.ledger = b.usage;
    auto client = llm_client::create(std::move(co));
    if (!client) return ks::error{cfg.source + ": coder.llm: " + client.message()};
    std::shared_ptr<llm_client> shared = std::move(*client);
    llm_coder_options lo;
    lo.chat = [shared](const chat_request& r) { return shared->chat(r); };
    lo.library = lib;
    b.model = std::make_shared<llm_coder>(std::move(lo));
    b.code = b.model;
    spdlog::info("coder: llm, {}", shared->describe());
    return b;
  }
  rules_coder_options ro;
  ro.gpu_worker = cfg.gpus.worker_binary.empty() ? default_worker_binary() : cfg.gpus.worker_binary;
  ro.skills_dir = KS_DEFAULT_SKILLS_DIR;
  auto rules = rules_coder::create(ro);
  if (!rules) return ks::error{"the rules coder: " + rules.message()};
  b.code = std::shared_ptr<coder>(std::move(*rules));
  spdlog::info("coder: rules (templates lowered from each task's graph; no model)");
  return b;
}

std::string progress_line(const task_progress& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%s] %-10s round %2u  reviews %3u  best %s", p.task.c_str(),
                p.state.c_str(), p.round, p.reviews,
                p.best_speedup > 0 ? (std::to_string(p.best_speedup).substr(0, 5) + "x").c_str()
                                   : "-");
  std::string line = buf;
  if (!p.detail.empty()) line += "  " + p.detail;
  return line;
}

}  // namespace

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
  auto lib = load_skill_library(KS_DEFAULT_SKILLS_DIR);
  if (!lib) {
    std::cerr << lib.message() << "\n";
    return 1;
  }
  auto library = std::make_shared<const skill_library>(std::move(*lib));
  spdlog::info("experiment '{}': {} tasks, coder {}, {} seeds, {} rounds", cfg->name,
               tasks.size(), cfg->coder.backend, cfg->budgets.seeds, cfg->budgets.rounds);
  daemon_system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  auto found = discover_gpus(sys, cfg->gpus);
  if (found.device_count() == 0) {
    std::cerr << "kernelskill run: " << no_gpu_message(found) << "\n";
    return 3;
  }
  print_nodes(found);
  for (auto& p : found.problems) spdlog::warn("{}", p);
  auto backend = make_backend(*cfg, library);
  if (!backend) {
    std::cerr << "kernelskill run: " << backend.message() << "\n";
    return 1;
  }

  auto db = store::open(cfg->memory.path);
  if (!db) {
    std::cerr << "kernelskill run: " << db.message() << "\n";
    return 1;
  }
  std::shared_ptr<store> memory = std::move(*db);
  if (auto s = memory->install_skill_library(static_cast<uint32_t>(library->version),
                                             library_hash(*library), to_store_docs(*library));
      !s) {
    std::cerr << "kernelskill run: " << s.message() << "\n";
    return 1;
  }

  // A pool per local GPU (it owns its worker: restarts it after a crash, kills it on a
  // hung review); remote workers are used as they are.
  std::vector<gpu_pool_actor> pools;
  for (auto& node : found.nodes) {
    if (!node.process) {
      pools.push_back(node.handle);
      continue;
    }
    for (auto& d : node.info.devices) {
      gpu_pool_options po;
      po.worker.binary = cfg->gpus.worker_binary;
      po.worker.device = d.ordinal;
      po.worker.log_level = "warn";
      po.max_queue = static_cast<size_t>(std::max(
          cfg->budgets.device_queue_depth, cfg->budgets.tasks_in_flight * cfg->budgets.seeds));
      pools.push_back(sys.spawn<caf::detached>(gpu_pool, po));
    }
  }
  auto reviewer = sys.spawn(reviewer_agent, pools);

  experiment_options eo;
  eo.name = cfg->name;
  eo.tasks = tasks;
  eo.tasks_in_flight = static_cast<uint32_t>(cfg->budgets.tasks_in_flight);
  eo.output_dir = cfg->output.dir;
  eo.base = coordinator_options_from(*cfg);
  eo.base.backend = backend->code;
  eo.base.model = backend->model;
  eo.base.usage = backend->usage;
  eo.base.library = library;
  eo.base.memory = memory;
  eo.base.compiler = std::make_shared<nvrtc_compiler>();
  eo.on_progress = [](const task_progress& p) { std::fprintf(stderr, "%s\n", progress_line(p).c_str()); };
  auto summary = ks::run_experiment(sys, eo, reviewer);
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);
  for (auto& p : pools) caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  std::fputs(summary_markdown(summary).c_str(), stdout);
  std::fprintf(stderr, "kernelskill run: results in %s (summary.md, summary.json, tasks/)\n",
               cfg->output.dir.c_str());
  for (const auto& o : summary.outcomes)
    if (!o.success) return 5;
  return 0;
}

}  // namespace ks::cli
