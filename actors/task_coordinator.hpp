#pragma once
// The task coordinator: runs the optimisation loop for one task (docs/agent-loop.md;
// docs/architecture.md, "The data path"). It asks the generator for seed kernels and runs one seed line per
// seed, all at once; each line goes
//   review → (on failure) diagnose → repair, bounded → (on success) features →
//   plan (decision policy) → optimize → review → …
// until its round budget is spent or no allowed method is left (actors/seed_line.hpp
// draws its states and transitions). The best correct kernel of all lines is kept at
// every step.
//
// What it promises:
// - every attempt, plan, diagnosis, repair, review (status, speedup, metrics) and
//   kernel version is written to the store before the loop moves on (trajectory and
//   kernels column families), so a crash loses nothing already done;
// - a method that failed or did not help is not tried again in the same situation,
//   and A→B→A oscillation is broken (the decision policy reads the trajectory);
//   a candidate that fails after its repairs sends the line back to its best correct
//   version;
// - agents are monitored: an agent that dies or does not answer in time is replaced
//   and its request re-sent, at most max_agent_restarts times per line; then the
//   line ends with the reason, and the other lines and tasks go on;
// - a seed line that dies (an exception in it, or killed: any exit message but a
//   normal one stops it at its next step, writing nothing more) is started again
//   from its checkpoint, its last completed round, at most max_line_restarts times;
//   then the task ends with the other lines' results and the reason;
// - a coordinator killed the same way stops its lines at their next step and waits
//   for them before it ends, without an outcome: nothing of its run writes to the
//   store once it is gone, so the daemon can resume the task from its checkpoints
//   (daemon/scheduler.hpp) without two runs of one task racing;
// - a flagged review (output independent of the input, a speedup past the
//   threshold) is never taken as the best kernel.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "coder/coder.hpp"
#include "policy/skill_library.hpp"
#include "protocol/protocol.hpp"

namespace ks {

class llm_coder;
class nvrtc_compiler;
class store;
class usage_ledger;

struct coordinator_options {
  task_spec task;
  uint32_t seeds = 4;
  uint32_t rounds = 15;          // optimisation rounds per seed line
  uint32_t repair_attempts = 3;  // repairs of one failing candidate
  review_options review;         // trials, size, timeout of each review
  bool use_long_term_memory = true;
  bool use_short_term_memory = true;

  std::shared_ptr<coder> backend;                // required
  std::shared_ptr<llm_coder> model;              // the diagnoser's model; may be null
  std::shared_ptr<const skill_library> library;  // required
  std::shared_ptr<store> memory;                 // required
  std::shared_ptr<nvrtc_compiler> compiler;      // for features' PTX; may be null
  std::shared_ptr<usage_ledger> usage;           // tokens of the task; may be null

  int max_agent_restarts = 3;
  double agent_timeout_s = 1800;  // one agent request; past it the agent is replaced
  int max_line_restarts = 2;      // per seed line: a line that dies starts again from its checkpoint
  // Per task, for whoever runs coordinators (the daemon's scheduler, the experiment
  // runner): a coordinator that stops without an outcome is resumed this often.
  int max_coordinator_restarts = 2;
  // Which methods the line may try per round when the first does not apply.
  uint32_t methods_per_round = 3;

  // Every seed line checkpoints itself in the store after each completed round (its
  // round, current and best kernels and their reviews; see checkpoint_prefix). With
  // resume, a run starts from the task's checkpoints: no seeds are generated again
  // and no completed round runs again. Without it, old checkpoints are cleared first.
  bool resume = false;
  // When set and true, the task stops at its lines' next step with reason "cancelled".
  std::shared_ptr<const std::atomic<bool>> cancel;
  // When set, told of each actor of the task as it starts, on the thread that starts
  // it: "coordinator" (by task_coordinator), "line K", and each agent ("generator",
  // "optimizer of line K", …). For watching a task's actors from outside: the
  // supervision tests kill them with it.
  std::function<void(const std::string& role, const caf::actor& actor)> on_spawn;
};

// Where a task's checkpoints live in the store's tasks column family: the records
// whose ids start with this ("checkpoint/TASK/").
std::string checkpoint_prefix(const std::string& task);

// Runs the whole loop for opts.task, blocking until it ends; `reviewer` checks
// candidates; task_progress messages go to `progress` when it is valid. Call it from
// a detached actor or a thread of its own.
task_outcome run_task(caf::actor_system& sys, const coordinator_options& opts, const reviewer_actor& reviewer,
                      const caf::actor& progress);

// The same as an actor: runs, sends the task_outcome to `report_to`, and quits. Killed
// (an exit message whose reason is not normal), it stops its lines, waits for them,
// and quits with that reason, sending no outcome and recording no end.
void task_coordinator(caf::blocking_actor* self, coordinator_options opts, reviewer_actor reviewer, caf::actor progress,
                      caf::actor report_to);

}  // namespace ks
