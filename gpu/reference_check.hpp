#pragma once
// The worker's check of a task's reference before its first review: a submitted
// reference is untrusted code, and the reviewer runs it inside the worker process,
// where an endless loop would hang the worker and an allocation without end would
// take the machine's memory. So the first review of a task (per size) runs the
// reference once in a bounded child (`kernelskill-gpu --run-reference`, on the device
// the reviews use; base/bounded_child.hpp) under CPU-time, memory and wall-clock
// limits; a reference stopped there is never run in the worker.
//
// What it promises:
// - a reference that crosses a limit in the child gets an answer naming the task and
//   the limit (and the flag or config key that sets it) — the review is answered, the
//   worker does not hang; the verdict is kept for the task, so later reviews of it are
//   answered at once;
// - a reference that fails in the child for another reason (an error in it) is left to
//   the review, which reports that error in its own words;
// - the child's files are private and removed (base/private_dir.hpp).

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/bounded_child.hpp"
#include "gpu/reference_launcher.hpp"
#include "model/task.hpp"

namespace ks {

struct reference_check_options {
  process_limits limits;    // --reference-cpu-seconds, --reference-memory-mb, --reference-wall-seconds
  std::string device;       // --on for the child: "cpu" or "cuda:N"
  std::string program;      // kernelskill-gpu; empty: this process's own executable
  size_t remembered = 256;  // tasks whose verdict is kept (the oldest forgotten first)
  // Where the worker confines itself, the process that starts the children
  // (gpu/reference_launcher.hpp); null: they are started from this process.
  std::shared_ptr<reference_launcher> launcher;
};

class reference_check {
 public:
  explicit reference_check(reference_check_options opts) : opts_(std::move(opts)) {}

  // "" when the task's reference may run in this process at `size` (its named size;
  // empty: full size), else why not, in words for the review's message. The child's
  // wall clock is also held to 80% of `review_timeout_s` (when > 0), so that the answer
  // comes before whoever sent the review gives up on it.
  std::string refused(const task_spec& task, const std::string& size, double review_timeout_s);

 private:
  std::string run_child(const task_spec& task, const std::string& size, const process_limits& limits);

  reference_check_options opts_;
  std::mutex mu_;
  std::map<std::string, std::string> verdicts_;  // by task content and size
  std::list<std::string> order_;                 // oldest first
};

}  // namespace ks
