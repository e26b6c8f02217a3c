#pragma once
// The process that starts the reference checks' children for a worker that confines
// itself (kernelskill-gpu --listen --worker; base/sandbox.hpp). A child inherits its
// parent's Landlock domain, and the confined worker's domain reaches only the worker's
// own /proc/PID — not the child's, which the CUDA driver writes when it names its
// threads. So the worker forks this launcher before it confines itself, and each child
// then gets exactly its own sandbox (the worker's `references.*` policy and limits).
//
// What it promises:
// - it runs nothing but `PROGRAM --log-level error --run-reference TASK --on DEVICE
//   [--size S]` (DEVICE: cpu or cuda:N) on a task it writes into a private directory of
//   its own, under the limits it was started with (a request may only lower the wall
//   clock): a worker taken over by what it runs gains nothing by asking it;
// - it ends when the worker ends (its socket closes, or the worker's death signal);
// - run() from several threads is serialised; an error (not a bounded_run) where the
//   launcher is gone, and the caller then runs no child at all.

#include <memory>
#include <mutex>
#include <string>

#include "base/bounded_child.hpp"
#include "base/result.hpp"
#include "model/task.hpp"

namespace ks {

class reference_launcher {
 public:
  // Forks the launcher; call while the process has one thread and before it confines
  // itself. `program` is the worker's own executable.
  static result<std::shared_ptr<reference_launcher>> start(const std::string& program, const process_limits& limits);
  ~reference_launcher();
  reference_launcher(const reference_launcher&) = delete;
  reference_launcher& operator=(const reference_launcher&) = delete;

  // Runs the task's reference at `size` (a named size; empty: full) on `device` in a
  // bounded child whose wall clock is min(wall_seconds, the launcher's).
  result<bounded_run> run(const task_spec& task, const std::string& size, const std::string& device, int wall_seconds);

 private:
  reference_launcher(int fd, int pid) : fd_(fd), pid_(pid) {}
  int fd_ = -1;
  int pid_ = -1;
  std::mutex mu_;
};

// The child that runs `task`'s reference, in a private directory of its own: what both
// the launcher and a worker that does not confine itself run.
result<bounded_run> run_reference_child(const std::string& program, const std::string& device, const task_spec& task,
                                        const std::string& size, const process_limits& limits);

}  // namespace ks
