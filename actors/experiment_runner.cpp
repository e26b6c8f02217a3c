#include "actors/experiment_runner.hpp"

#include <chrono>
#include <deque>
#include <map>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "store/store.hpp"

namespace ks {

coordinator_options coordinator_options_from(const experiment_config& cfg) {
  coordinator_options o;
  o.seeds = static_cast<uint32_t>(cfg.budgets.seeds);
  o.rounds = static_cast<uint32_t>(cfg.budgets.rounds);
  o.repair_attempts = static_cast<uint32_t>(cfg.budgets.repair_attempts);
  o.review.trials = static_cast<uint32_t>(cfg.review.trials);
  o.review.suspicious_speedup = cfg.review.suspicious_speedup;
  o.review.draw_inputs = cfg.review.draw_inputs;
  o.review.timeout_s = cfg.gpus.review_timeout_s;
  // Tasks are already resized to review.size when loaded: review them as they are.
  o.review.size.clear();
  o.use_long_term_memory = cfg.ablation.long_term_memory;
  o.use_short_term_memory = cfg.ablation.short_term_memory;
  // A model call may take timeout × (retries + 1) per format repair; leave room.
  if (cfg.coder.backend == "llm")
    o.agent_timeout_s = std::max(600.0, cfg.coder.llm.timeout_s * (cfg.coder.llm.max_retries + 1) * 3 + 60);
  return o;
}

run_summary run_experiment(caf::actor_system& sys, const experiment_options& opts, const reviewer_actor& reviewer) {
  const auto t0 = std::chrono::steady_clock::now();
  run_summary summary;
  summary.experiment = opts.name;
  summary.coder = opts.base.backend ? opts.base.backend->name() : "";
  summary.devices = opts.devices;
  caf::scoped_actor self{sys};

  std::deque<size_t> waiting;
  for (size_t i = 0; i < opts.tasks.size(); ++i) waiting.push_back(i);
  std::map<std::string, task_outcome> finished;
  std::map<caf::actor_addr, size_t> running;
  auto pending_names = [&] {
    std::vector<std::string> names;
    for (const auto& t : opts.tasks)
      if (!finished.count(t.name)) names.push_back(t.name);
    return names;
  };
  auto snapshot = [&] {
    run_summary s = summary;
    for (const auto& t : opts.tasks)
      if (auto it = finished.find(t.name); it != finished.end()) s.outcomes.push_back(it->second);
    s.pending = pending_names();
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  };
  std::map<size_t, int> coordinator_restarts;
  auto launch = [&](size_t i, bool resume) {
    coordinator_options o = opts.base;
    o.task = opts.tasks[i];
    o.resume = resume;
    auto c =
        self->spawn<caf::detached + caf::monitored>(task_coordinator, o, reviewer, caf::actor{self}, caf::actor{self});
    running[c.address()] = i;
  };
  auto start_next = [&] {
    while (!waiting.empty() && running.size() < std::max<uint32_t>(1, opts.tasks_in_flight)) {
      size_t i = waiting.front();
      waiting.pop_front();
      launch(i, false);
    }
  };
  auto finish_task = [&](task_outcome o) {
    if (!opts.output_dir.empty()) {
      std::vector<trajectory_entry> traj;
      if (opts.base.memory) {
        auto t = opts.base.memory->read_trajectory(o.task);
        if (t) traj = std::move(*t);
      }
      if (auto s = write_task_result(opts.output_dir, o, traj); !s) spdlog::error("task '{}': {}", o.task, s.message());
    }
    finished[o.task] = std::move(o);
    if (!opts.output_dir.empty())
      if (auto s = write_summary(opts.output_dir, snapshot()); !s) spdlog::error("{}", s.message());
  };

  start_next();
  self->receive_while([&] { return !running.empty(); })(
      [&](task_progress& p) {
        if (opts.on_progress) opts.on_progress(p);
      },
      [&](task_outcome& o) { finish_task(std::move(o)); },
      [&](caf::down_msg& d) {
        auto it = running.find(d.source);
        if (it == running.end()) return;
        const size_t i = it->second;
        const task_spec& t = opts.tasks[i];
        running.erase(it);
        if (!finished.count(t.name) && coordinator_restarts[i] < opts.base.max_coordinator_restarts) {
          // The coordinator stopped before reporting (its lines have stopped too): the
          // task goes on from its checkpoints.
          ++coordinator_restarts[i];
          spdlog::warn(
              "task '{}': the task coordinator stopped ({}); resuming it from its checkpoints "
              "({} of {})",
              t.name, sys.render(d.reason), coordinator_restarts[i], opts.base.max_coordinator_restarts);
          launch(i, true);
          return;
        }
        if (!finished.count(t.name)) {
          // The coordinator stopped before reporting too often: the task failed, the
          // others go on.
          task_outcome o;
          o.task = t.name;
          const int n = coordinator_restarts[i];
          o.reason = n > 0 ? "the task coordinator stopped " + std::to_string(n + 1) +
                                 " times (the last: " + sys.render(d.reason) + "); not resumed again"
                           : "the task coordinator stopped (" + sys.render(d.reason) + ")";
          spdlog::error("task '{}': {}", t.name, o.reason);
          if (opts.on_progress) opts.on_progress(task_progress{t.name, "failed", 0, 0, 0, "", o.reason});
          finish_task(std::move(o));
        }
        start_next();
      });
  return snapshot();
}

}  // namespace ks
