#pragma once
// What `kernelskill run` and `kernelskill serve` both set up from a config: the actor
// system's config, logging, the coder backend, and the GPU fleet (a pool per device,
// local or on a node, and the reviewer in front of them).

#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>

#include "base/result.hpp"
#include "cli/commands.hpp"
#include "coder/coder.hpp"
#include "coder/lowering.hpp"
#include "config/experiment_config.hpp"
#include "fleet/gpu_nodes.hpp"
#include "fleet/review_meter.hpp"
#include "policy/skill_library.hpp"
#include "protocol/protocol.hpp"
#include "report/run_report.hpp"

namespace ks {
class llm_coder;
class usage_ledger;
}  // namespace ks

namespace ks::cli {

// The actor system of the daemon side: the protocol's types and the middleman (for
// workers on loopback or other machines).
struct daemon_system_config : caf::actor_system_config {
  daemon_system_config();
};

// Loads the config (or the defaults when path is empty) and sets up logging from it,
// --log-level taking precedence.
result<experiment_config> load_for_command(const std::string& path, const global_options& g);

// The coder backend the config asks for. The llm client is kept alive by the coder's
// chat function (it holds the shared pointer).
struct backend_choice {
  std::shared_ptr<coder> code;
  std::shared_ptr<llm_coder> model;     // set for the llm backend (the diagnoser uses it)
  std::shared_ptr<usage_ledger> usage;  // set for the llm and hybrid backends
};
// `device`: the GPU the rules coder writes for (how many blocks fill it); see
// lowering_device_for.
result<backend_choice> make_backend(const experiment_config& cfg, std::shared_ptr<const skill_library> lib,
                                    const lowering_device& device = {});

// The GPU the rules coder writes kernels for: the model most of the discovered
// devices are (the first found on a tie), with its SM count; an H200's defaults when
// none was found (a daemon whose nodes come later).
lowering_device lowering_device_for(const gpu_discovery& found);

// The GPUs as the agents see them: a pool per device (a local device's pool owns its
// worker: restarts it after a crash, kills it on a hung review; a remote node's
// device gets a remote pool, fleet/remote_pool.hpp) and the reviewer in front of them
// (fleet/review_dispatcher.hpp: one GPU model per task, nodes in and out of the
// rotation, lost reviews re-queued), metered for /metrics. names: "local/0",
// "HOST:PORT/0", in the meter's order.
struct gpu_fleet {
  std::vector<gpu_pool_actor> pools;
  std::vector<std::string> names;
  std::shared_ptr<review_meter> meter;
  reviewer_actor reviewer;
  void stop();  // ends the reviewer, and with it the pools (and their workers)
};
gpu_fleet start_fleet(caf::actor_system& sys, const experiment_config& cfg, const gpu_discovery& found);

// One line per GPU found, on stdout.
void print_nodes(const gpu_discovery& found);

// How run_tasks reports and resumes.
struct run_hooks {
  std::string who;              // prefixes its messages (default "kernelskill run")
  std::string progress_prefix;  // before each progress line on stderr
  bool resume = false;          // start each task from its checkpoints in cfg's store
};
struct experiment_result {
  int status = 0;  // 0 ran (the summary says how each task ended), 1 a setup error, 3 no GPU
  run_summary summary;
};
// What `kernelskill run` does with a config's tasks, already loaded: finds the GPUs,
// makes the backend, opens the store and installs the skill library, starts a review
// pool per GPU and runs the experiment runner (output.dir written as tasks finish).
// Errors are printed on stderr.
experiment_result run_tasks(const experiment_config& cfg, const std::vector<task_spec>& tasks, const run_hooks& hooks);

}  // namespace ks::cli
