#include "cli/run_setup.hpp"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "base/logging.hpp"
#include "coder/hybrid_coder.hpp"
#include "coder/llm_coder.hpp"
#include "coder/rules_coder.hpp"
#include "fleet/gpu_pool.hpp"
#include "fleet/remote_pool.hpp"
#include "fleet/review_dispatcher.hpp"
#include "llm/llm_client.hpp"
#include "llm/usage_ledger.hpp"

namespace ks::cli {

daemon_system_config::daemon_system_config() {
  register_protocol(*this);
  load<caf::io::middleman>();
}

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
      std::printf("%s (%s): gpu %d: %s, compute capability %d.%d, %.1f GiB, %d SMs\n", node.name.c_str(),
                  node.info.host.c_str(), d.ordinal, d.name.c_str(), d.cc_major, d.cc_minor,
                  d.total_memory_bytes / 1073741824.0, d.multiprocessors);
}

lowering_device lowering_device_for(const gpu_discovery& found) {
  lowering_device out;
  // Models as the dispatcher tells them apart (device_class); a device of each, how many.
  std::vector<std::pair<const device_info*, int>> models;
  for (const auto& node : found.nodes)
    for (const auto& d : node.info.devices) {
      auto it = std::find_if(models.begin(), models.end(),
                             [&](const auto& m) { return device_class(*m.first) == device_class(d); });
      if (it == models.end())
        models.push_back({&d, 1});
      else
        ++it->second;
    }
  const std::pair<const device_info*, int>* best = nullptr;
  for (const auto& m : models)
    if (!best || m.second > best->second) best = &m;
  if (best && best->first->multiprocessors > 0) out.multiprocessors = best->first->multiprocessors;
  if (best && best->first->cc_major > 0) {
    out.cc_major = best->first->cc_major;
    // The opt-in shared memory per block and an SM's, by architecture (the worker
    // reports no such attribute): 227 / 228 KiB on sm_90 and sm_100, 99 / 100 KiB on
    // sm_120, 163 / 164 KiB on sm_80, 99 / 100 KiB on sm_86/89; only sm_90 on reads
    // them (clusters).
    const int cc = best->first->cc_major * 10 + best->first->cc_minor;
    out.shared_per_block_optin = cc >= 120 ? 101376 : cc >= 90 ? 232448 : cc == 80 ? 166912 : 101376;
    out.shared_per_sm = cc >= 120 ? 102400 : cc >= 90 ? 233472 : cc == 80 ? 167936 : 102400;
  }
  return out;
}

result<backend_choice> make_backend(const experiment_config& cfg, std::shared_ptr<const skill_library> lib,
                                    const lowering_device& device) {
  backend_choice b;
  std::shared_ptr<llm_client> client;
  if (cfg.coder.backend == "llm" || cfg.coder.backend == "hybrid") {
    auto co = client_options(cfg);
    b.usage = std::make_shared<usage_ledger>();
    co.ledger = b.usage;
    auto made = llm_client::create(std::move(co));
    if (!made) return ks::error{cfg.source + ": coder.llm: " + made.message()};
    client = std::move(*made);
  }
  if (cfg.coder.backend == "llm") {
    b.model = std::make_shared<llm_coder>(llm_coder_options_for(cfg, client, lib));
    b.code = b.model;
    spdlog::info("coder: llm, {}{}", client->describe(),
                 cfg.ablation.long_term_memory ? "" : " (long-term memory off: no method knowledge in prompts)");
    return b;
  }
  rules_coder_options ro;
  ro.gpu_worker = cfg.gpus.worker_binary.empty() ? default_worker_binary() : cfg.gpus.worker_binary;
  ro.skills_dir = KS_DEFAULT_SKILLS_DIR;
  ro.limits = {.cpu_seconds = cfg.references.cpu_seconds,
               .memory_mb = reference_memory_mb(cfg.references, cfg.budgets.tasks_in_flight),
               .wall_seconds = cfg.references.wall_seconds,
               .sandbox = reference_sandbox(cfg.references)};
  ro.device = device;
  auto rules = rules_coder::create(ro);
  if (!rules) return ks::error{"the rules coder: " + rules.message()};
  std::shared_ptr<coder> templates(std::move(*rules));
  if (cfg.coder.backend == "hybrid") {
    // The diagnoser keeps the rules' reading (b.model unset): the model reads a
    // failure only where it writes the repair (hybrid_coder::repair).
    b.code =
        std::make_shared<hybrid_coder>(templates, std::make_shared<llm_coder>(llm_coder_options_for(cfg, client, lib)));
    spdlog::info("coder: hybrid, templates for {} SMs first, then {}", device.multiprocessors, client->describe());
    return b;
  }
  b.code = templates;
  spdlog::info("coder: rules (templates lowered from each task's graph for {} SMs; no model)", device.multiprocessors);
  return b;
}

gpu_fleet start_fleet(caf::actor_system& sys, const experiment_config& cfg, const gpu_discovery& found) {
  gpu_fleet out;
  dispatcher_options dopts;
  const size_t max_queue =
      static_cast<size_t>(std::max(cfg.budgets.device_queue_depth, cfg.budgets.tasks_in_flight * cfg.budgets.seeds));
  dopts.remote.max_queue = max_queue;
  dopts.remote.token = found.remote_token;
  for (auto& node : found.nodes) {
    for (auto& d : node.info.devices) {
      gpu_pool_actor pool;
      std::string name;
      if (node.is_remote()) {
        remote_pool_options ro = dopts.remote;
        ro.host = node.remote.host;
        ro.port = node.remote.port;
        ro.device = d.ordinal;
        ro.expected = d;
        pool = spawn_remote_pool(sys, ro);
        name = remote_device_name(ro);
      } else {
        gpu_pool_options po;
        po.worker.binary = cfg.gpus.worker_binary;
        po.worker.device = d.ordinal;
        po.worker.log_level = "warn";
        po.worker.trial_cache_gib = cfg.gpus.trial_cache_gib;
        po.worker.profile_replay = cfg.gpus.profile_replay;
        po.worker.reference_cpu_seconds = cfg.references.cpu_seconds;
        po.worker.reference_memory_mb = reference_memory_mb(cfg.references, cfg.budgets.tasks_in_flight);
        po.worker.reference_wall_seconds = cfg.references.wall_seconds;
        po.worker.sandbox = cfg.references.sandbox;
        po.worker.sandbox_read = cfg.references.read_paths;
        po.max_queue = max_queue;
        pool = sys.spawn<caf::detached>(gpu_pool, po);
        name = node.name + "/" + std::to_string(d.ordinal);
      }
      out.pools.push_back(pool);
      out.names.push_back(name);
      dopts.pools.push_back({pool, name, device_class(d)});
    }
  }
  for (auto& r : found.unreachable) dopts.late_nodes.push_back({r.host, r.port});
  out.meter = std::make_shared<review_meter>(out.names);
  dopts.meter = out.meter;
  out.reviewer = spawn_review_dispatcher(sys, std::move(dopts));
  return out;
}

void gpu_fleet::stop() {
  caf::anon_send_exit(reviewer, caf::exit_reason::user_shutdown);  // its pools end with it
}

}  // namespace ks::cli
