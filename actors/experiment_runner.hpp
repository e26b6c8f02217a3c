#pragma once
// An experiment run: every task of a config through its own task coordinator, at most
// budgets.tasks_in_flight at once, with progress reported as tasks advance and the
// output directory (report/run_report.hpp) written as tasks finish. One task's
// failure never stops another. A coordinator that stops without an outcome (killed,
// or an exception in it) is started again on the task's checkpoints, at most
// base.max_coordinator_restarts times; then the task fails with the reason.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/task_coordinator.hpp"
#include "config/experiment_config.hpp"
#include "report/run_report.hpp"

namespace ks {

struct experiment_options {
  std::string name;  // the experiment's name (config `name`)
  std::vector<task_spec> tasks;
  uint32_t tasks_in_flight = 2;
  std::string output_dir;  // empty: nothing is written
  uint32_t devices = 0;    // GPUs reviewing, for the summary's throughput (0: unknown)
  // The per-task options every coordinator starts from (task is filled per task).
  coordinator_options base;
  // Called on the runner's thread for each progress report, in order.
  std::function<void(const task_progress&)> on_progress;
};

// Runs every task and returns the summary. Blocking.
run_summary run_experiment(caf::actor_system& sys, const experiment_options& opts, const reviewer_actor& reviewer);

// The options a config asks for (budgets, review, ablation), without the shared parts
// (backend, library, store, …), which the caller sets.
coordinator_options coordinator_options_from(const experiment_config& cfg);

}  // namespace ks
