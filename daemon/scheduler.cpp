#include "daemon/scheduler.hpp"

#include <chrono>
#include <deque>
#include <set>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "base/bounded_child.hpp"
#include "task/task_loader.hpp"

namespace ks {

scheduler::scheduler(caf::actor_system& sys, task_queue& queue, reviewer_actor reviewer, scheduler_options opts)
    : sys_(sys), queue_(queue), reviewer_(std::move(reviewer)), opts_(std::move(opts)) {}

scheduler::~scheduler() { stop(); }

void scheduler::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void scheduler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void scheduler::cancel(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = cancel_flags_.find(id);
  if (it == cancel_flags_.end()) return;
  *it->second = true;
  // A child running the task's reference (the rules coder's graph export) may be in an
  // endless loop: it is ended now, not at the task's next step.
  if (int n = cancel_children(id); n > 0)
    spdlog::info("task '{}': ended {} child process(es) running its reference", id, n);
}

size_t scheduler::running() const {
  std::lock_guard lock(mu_);
  return cancel_flags_.size();
}

void scheduler::loop() {
  caf::scoped_actor self{sys_};
  std::deque<std::string> to_resume;
  for (auto& id : queue_.interrupted()) to_resume.push_back(id);
  if (!to_resume.empty())
    spdlog::info("{} task(s) were running when the daemon stopped; resuming them first", to_resume.size());
  std::map<caf::actor_addr, std::string> running;
  std::set<std::string> reported;                   // tasks whose outcome arrived
  std::map<std::string, int> coordinator_restarts;  // of running tasks

  auto fail = [&](const std::string& id, const std::string& why) {
    task_outcome o;
    o.task = id;
    o.reason = why;
    spdlog::error("task '{}': {}", id, why);
    if (auto s = queue_.finish(id, o); !s) spdlog::error("task '{}': {}", id, s.message());
  };
  auto launch = [&](const queued_task& t, bool resume) {
    auto spec = queue_.spec(t.id);
    if (spec && !opts_.size.empty() && spec->sizes.count(opts_.size)) spec = with_size(*spec, opts_.size);
    if (!spec) return fail(t.id, spec.message());
    coordinator_options o = opts_.base;
    o.task = std::move(*spec);
    // Everything the coordinator keeps (trajectory, kernels, checkpoints) is keyed by
    // the task's name: the id makes it unique per submission.
    o.task.name = t.id;
    o.resume = resume;
    auto flag = std::make_shared<std::atomic<bool>>(t.cancel_requested);
    o.cancel = flag;
    {
      std::lock_guard lock(mu_);
      cancel_flags_[t.id] = flag;
    }
    auto c =
        self->spawn<caf::detached + caf::monitored>(task_coordinator, o, reviewer_, caf::actor{self}, caf::actor{self});
    running[c.address()] = t.id;
    spdlog::info("task '{}': {}", t.id, resume ? "resuming" : "started");
  };
  // The task's coordinator stopped without an outcome: resume it from its checkpoints
  // (its lines have stopped: task_coordinator.hpp), or fail it once that has happened
  // too often.
  auto coordinator_lost = [&](const std::string& id, const std::string& why) {
    if (stop_) {
      // The daemon is stopping: the task stays running in the queue and resumes from
      // its checkpoints at the next start, as every running task does.
      spdlog::warn("task '{}': the task coordinator stopped ({}) as the daemon stops; it resumes at the next start", id,
                   why);
      coordinator_restarts.erase(id);
      return;
    }
    int& n = coordinator_restarts[id];
    if (n >= opts_.base.max_coordinator_restarts) {
      coordinator_restarts.erase(id);
      return fail(id, n > 0 ? "the task coordinator stopped " + std::to_string(n + 1) + " times (the last: " + why +
                                  "); not resumed again"
                            : "the task coordinator stopped (" + why + ")");
    }
    ++n;
    auto t = queue_.resume(id, "resuming after its coordinator stopped (" + why + ")");
    if (!t) return fail(id, "the task coordinator stopped (" + why + ") and the task cannot resume: " + t.message());
    spdlog::warn("task '{}': the task coordinator stopped ({}); resuming it from its checkpoints ({} of {})", id, why,
                 n, opts_.base.max_coordinator_restarts);
    launch(*t, true);
  };
  auto start_more = [&] {
    if (!opts_.run_tasks || (opts_.gpus_up && !opts_.gpus_up())) return;
    while (running.size() < std::max<uint32_t>(1, opts_.tasks_in_flight) && !stop_) {
      if (!to_resume.empty()) {
        auto id = to_resume.front();
        to_resume.pop_front();
        auto t = queue_.resume(id);
        if (!t) {
          spdlog::error("task '{}': cannot resume: {}", id, t.message());
          continue;
        }
        launch(*t, true);
        continue;
      }
      auto next = queue_.start_next();
      if (!next) {
        spdlog::error("the queue: {}", next.message());
        return;
      }
      if (!*next) return;
      launch(**next, false);
    }
  };

  while (!stop_) {
    start_more();
    self->receive(
        [&](task_progress& p) {
          if (auto s = queue_.progress(p.task, p); !s) spdlog::error("task '{}': {}", p.task, s.message());
        },
        [&](task_outcome& o) {
          reported.insert(o.task);
          if (auto s = queue_.finish(o.task, o); !s) spdlog::error("task '{}': {}", o.task, s.message());
          spdlog::info("task '{}': {}", o.task, o.reason);
        },
        [&](caf::down_msg& d) {
          auto it = running.find(d.source);
          if (it == running.end()) return;
          const std::string id = it->second;
          running.erase(it);
          {
            std::lock_guard lock(mu_);
            cancel_flags_.erase(id);
          }
          release_owner(id);
          if (!reported.count(id))
            coordinator_lost(id, sys_.render(d.reason));
          else
            coordinator_restarts.erase(id);
          reported.erase(id);
        },
        caf::after(std::chrono::milliseconds(200)) >> [] {});
  }
}

}  // namespace ks
