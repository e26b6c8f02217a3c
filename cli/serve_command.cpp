// `kernelskill serve`: the daemon (docs/daemon.md).

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/agents.hpp"
#include "actors/experiment_runner.hpp"
#include "base/private_dir.hpp"
#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "daemon/dashboard.hpp"
#include "daemon/http_api.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/task_queue.hpp"
#include "export/pytorch_export.hpp"
#include "fleet/gpu_pool.hpp"
#include "fleet/review_meter.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "store/store.hpp"

namespace ks::cli {

namespace {

// Descriptors and memory for a server that takes bursts (docs/daemon.md, "Bursts, slow
// bodies and hostile bodies"). Each connection is a descriptor: the soft limit (often
// 1,024) is raised to the hard one, so that a burst is queued, not refused. glibc
// raises its mmap threshold to the size of each large block freed, after which 16 MiB
// request bodies come from (and stay in) the heap: a fixed threshold keeps every block
// of 1 MiB or more in a mapping of its own, returned when freed. Its arenas (up to 8
// per core, one per thread that allocated) keep what threads freed; four bound that.
void prepare_process() {
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::mallopt(M_ARENA_MAX, 4);
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
}

}  // namespace

int serve(const std::string& config_path, const std::string& listen, const global_options& g) {
  prepare_process();
  // SIGINT/SIGTERM are taken by sigwait below, on the main thread; every thread
  // started from here inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto cfg = load_for_command(config_path, g);
  if (!cfg) {
    std::cerr << cfg.message() << "\n";
    return 1;
  }
  auto where = parse_host_port(listen.empty() ? cfg->serve.listen : listen, /*allow_any_port=*/true);
  if (!where) {
    std::cerr << "kernelskill serve: " << (listen.empty() ? "serve.listen: " : "--listen: ") << where.message() << "\n";
    return 1;
  }
  std::string token;
  if (const char* t = std::getenv(cfg->serve.token_env.c_str())) token = t;

  auto lib = load_skill_library(KS_DEFAULT_SKILLS_DIR);
  if (!lib) {
    std::cerr << lib.message() << "\n";
    return 1;
  }
  auto library = std::make_shared<const skill_library>(std::move(*lib));
  auto db = store::open(cfg->memory.path);
  if (!db) {
    std::cerr << "kernelskill serve: " << db.message() << "\n";
    return 1;
  }
  std::shared_ptr<store> memory = std::move(*db);
  // Children's scratch beside the store, cleared of what a killed daemon left.
  auto swept = use_scratch_root(std::filesystem::path(cfg->memory.path) / "scratch");
  if (!swept) {
    std::cerr << "kernelskill serve: " << swept.message() << "\n";
    return 1;
  }
  if (*swept > 0) spdlog::info("scratch: removed {} entries a previous run left", *swept);
  if (auto s = memory->install_skill_library(static_cast<uint32_t>(library->version), library_hash(*library),
                                             to_store_docs(*library));
      !s) {
    std::cerr << "kernelskill serve: " << s.message() << "\n";
    return 1;
  }
  auto queue = task_queue::open(memory);
  if (!queue) {
    std::cerr << "kernelskill serve: " << queue.message() << "\n";
    return 1;
  }

  daemon_system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  auto found = discover_gpus(sys, cfg->gpus);
  print_nodes(found);
  for (auto& p : found.problems) spdlog::warn("{}", p);
  if (found.device_count() == 0)
    spdlog::warn("no GPU: tasks are accepted and wait in the queue. {}", no_gpu_message(found));
  // The rules coder writes for the GPUs found at start (an H200's shape when none was).
  auto backend = make_backend(*cfg, library, lowering_device_for(found));
  if (!backend) {
    std::cerr << "kernelskill serve: " << backend.message() << "\n";
    return 1;
  }
  auto fleet = start_fleet(sys, *cfg, found);

  scheduler_options so;
  so.base = coordinator_options_from(*cfg);
  so.base.backend = backend->code;
  so.base.model = backend->model;
  so.base.usage = backend->usage;
  so.base.library = library;
  so.base.memory = memory;
  so.base.compiler = std::make_shared<nvrtc_compiler>();
  so.tasks_in_flight = static_cast<uint32_t>(cfg->budgets.tasks_in_flight);
  // Nodes not reached yet are tried again (the dispatcher adds their devices when they
  // answer): tasks start while some device is in the rotation.
  so.run_tasks = found.device_count() > 0 || !found.unreachable.empty();
  so.gpus_up = [meter = fleet.meter] {
    for (const auto& p : meter->read())
      if (p.up) return true;
    return false;
  };
  so.size = cfg->review.size;
  scheduler tasks(sys, **queue, fleet.reviewer, so);

  http_api_options ho;
  ho.host = where->host;
  ho.port = where->port;
  ho.token = token;
  ho.header_timeout_s = cfg->serve.header_timeout_s;
  ho.body_timeout_s = cfg->serve.body_timeout_s;
  ho.max_pending_connections = static_cast<size_t>(cfg->serve.max_pending_connections);
  ho.rounds_budget = static_cast<uint32_t>(cfg->budgets.seeds * cfg->budgets.rounds);
  ho.gpus = found.device_count();
  ho.version = std::string("kernelskill 0.1.0 (") + protocol_version + ")";
  http_api_context hc;
  hc.queue = queue->get();
  hc.tasks = &tasks;
  hc.memory = memory.get();
  hc.meter = fleet.meter.get();
  hc.usage = backend->usage.get();
  hc.dashboard = &dashboard_page;
  // The result's `pytorch`: the best kernel as a ModelNew module (docs/export.md).
  // A result's ModelNew runs only code the project wrote, also for a task stored with a
  // KernelBench problem's source before requests were refused one.
  hc.export_pytorch = [](const task_spec& t, const candidate& c) { return shared_module_source(t, c); };
  http_api api(ho, hc);
  auto port = api.bind();
  if (!port) {
    std::cerr << "kernelskill serve: " << port.message() << "\n";
    return 1;
  }
  tasks.start();
  std::thread http([&] { api.serve(); });
  auto counts = (*queue)->counts();
  spdlog::info("daemon: {} queued, {} to resume, {} ended; {} GPU(s); tasks in flight {}", counts[task_state::queued],
               counts[task_state::running],
               counts[task_state::done] + counts[task_state::failed] + counts[task_state::cancelled],
               found.device_count(), so.tasks_in_flight);
  std::string host =
      where->host.find(':') != std::string::npos && where->host.front() != '[' ? "[" + where->host + "]" : where->host;
  std::printf("kernelskill serve: listening on http://%s:%u\n", host.c_str(), unsigned{*port});
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("daemon: stopping on signal {}; running tasks resume at the next start", sig);
  api.stop();
  http.join();
  tasks.stop();
  // Everything is in the store already (write-ahead logged). Running coordinators
  // would hold the actor system's shutdown until their reviews end; the next start
  // resumes them from their checkpoints, so leave now, as a crash would.
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace ks::cli
