#pragma once
// The daemon's scheduler: runs queued tasks, at most tasks_in_flight at once, each
// through its own task coordinator; tasks that were running when the daemon stopped
// go first and resume from their checkpoints. It writes every progress report and
// outcome to the queue as it arrives, and stops a task whose cancel was requested.
// One task's failure never stops another. A task whose coordinator stops without an
// outcome (killed, or an exception in it) is resumed from its checkpoints while the
// daemon runs on, as after a restart (its lines have stopped before its coordinator
// ends: task_coordinator.hpp), at most base.max_coordinator_restarts times; then it fails
// with the reason. One that stops while the scheduler itself stops stays running in the
// queue and resumes at the next start.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/fwd.hpp>

#include "actors/task_coordinator.hpp"
#include "daemon/task_queue.hpp"

namespace ks {

struct scheduler_options {
  // What every coordinator starts from (task, resume and cancel are set per task).
  coordinator_options base;
  uint32_t tasks_in_flight = 2;
  // False when no GPU is reachable: tasks wait in the queue.
  bool run_tasks = true;
  // When set, tasks start only while it says a GPU is in the rotation (nodes that
  // were not reachable at start may join later; fleet/review_dispatcher.hpp).
  std::function<bool()> gpus_up;
  // The size (task's named shapes) tasks are reviewed at; empty: their own shapes.
  std::string size;
};

class scheduler {
 public:
  scheduler(caf::actor_system& sys, task_queue& queue, reviewer_actor reviewer, scheduler_options opts);
  ~scheduler();  // stops the loop; running coordinators are left to the process's end
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  void start();
  void stop();
  // Asks a running task to stop at its next step (the queue already says so).
  void cancel(const std::string& id);
  size_t running() const;

 private:
  void loop();

  caf::actor_system& sys_;
  task_queue& queue_;
  reviewer_actor reviewer_;
  scheduler_options opts_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> cancel_flags_;  // running tasks
};

}  // namespace ks
