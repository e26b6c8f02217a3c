#pragma once
// The one place a task writes down what it did: its trajectory entries in the store
// (the short-term memory that the planner, diagnoser and repairer read back, and that
// reports print) and its seed lines' task_progress messages to the coordinator.
// Each kind of entry and of progress is made by one function here, so its text and
// fields are the same wherever in the loop it happens.
//
// What it promises:
// - an entry is appended to the store before the call returns (a failed write is
//   logged and the loop goes on: the trajectory is a record, not a lock);
// - a line's entries carry the task's name and the line's round at the time; the
//   task's own entries (its seeds, its end) carry round 0;
// - a line's progress carries its round, its reviews and its best kernel as they are
//   at the time of the message.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/review.hpp"
#include "model/run.hpp"
#include "model/trajectory.hpp"

namespace ks {

class store;

// What a seed line has achieved so far (what its progress and outcome report).
struct line_tally {
  uint32_t round = 0;             // optimisation rounds begun
  uint32_t reviews = 0;           // reviews run (a verdict seen before on the line is not one)
  review_phases review_time;      // their phase times, summed
  int restarts = 0;               // agent restarts, all the line's agents together
  std::optional<candidate> best;  // the best correct kernel; none before the first
  review_result best_review;
};

// The first 12 characters of a candidate id, as entries and progress show it.
std::string short_id(const std::string& id);

// The task's own entries, beside its lines': a seed the generator wrote (`backend`
// names the coder), and the task's end.
void record_seed(store& memory, const std::string& task, const candidate& seed, const std::string& backend);
void record_task_end(store& memory, const std::string& task, const task_outcome& o);

// What one seed line writes. It reads the line's tally for the round of each entry
// and the figures of each progress message.
class line_recorder {
 public:
  line_recorder(caf::blocking_actor* self, caf::actor coordinator, std::shared_ptr<store> memory, std::string task,
                const line_tally& tally);

  // Trajectory entries, one per step of the line.
  // `c` was reviewed with verdict `r`; it is the attempt of `method`, planned in
  // `bottleneck` ("" for a seed, or the repair of one).
  void reviewed(const candidate& c, const review_result& r, const std::string& method, const std::string& bottleneck);
  void diagnosed(const candidate& c, const std::string& method, const review_result& r, const repair_plan& diagnosis);
  void repair_failed(const candidate& c, const std::string& why);
  // `fixed` is repair number `repairs` of `failed`.
  void repaired(const candidate& failed, const candidate& fixed, uint32_t repairs);
  // The line goes from `from` (the attempt of `method`) back to its best kernel.
  void back_to_best(const candidate& from, const std::string& method, const std::string& why);
  void planned(const candidate& c, const optimization_plan& plan);
  void not_applied(const candidate& c, const std::string& method, const std::string& why);
  void optimized(const candidate& base, const candidate& attempt, const std::string& method,
                 const std::string& bottleneck);
  // The line starts again from `c`, its checkpoint's kernel (an entry and progress).
  void resumed(const candidate& c);

  // Progress only.
  void reviewing(const candidate& c);
  void diagnosing(const candidate& c, review_status status);
  void new_best(const candidate& c, double speedup);
  void planning();
  void optimizing(const std::string& method);

 private:
  void append(trajectory_entry e);
  void progress(const std::string& state, const std::string& detail);

  caf::blocking_actor* self_;
  caf::actor coordinator_;
  std::shared_ptr<store> memory_;
  std::string task_;
  const line_tally& tally_;
};

}  // namespace ks
