#pragma once
// A coder backend: what writes kernels. The generator, optimizer and repairer agents
// each hold one and call it; everything else in the loop (reviewer, memories,
// decision policy) is the same whichever backend writes the code
// (docs/architecture.md, "Agents without an LLM").
//
// Backends: `rules` (coder/rules_coder.hpp — templates lowered from the reference's
// graph, no network) and `llm` (coder/llm_coder.hpp — prompts to a model endpoint).
//
// What a backend promises:
// - calls block (the agents run them on detached actors) and are safe to make from
//   several threads at once for different tasks;
// - a candidate it returns has task, source, plan, origin, parent_id and recipe set;
//   its id is content_hash's candidate_id(); round is left for the coordinator;
// - it never returns the same candidate twice for one request (seeds are distinct);
// - an error is a value whose message says what could not be done and why, e.g.
//   "method tile_shared_memory does not apply to template elementwise" — the
//   coordinator records it in the trajectory and moves on to the next ranked method.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/review.hpp"
#include "model/task.hpp"
#include "model/trajectory.hpp"

namespace ks {

// What the optimizer knows when it applies a method to a correct candidate.
struct optimize_input {
  task_spec task;
  candidate base;                         // correct, reviewed
  review_result review;                   // base's review (timing, profile, resources)
  code_features features;                 // base's static features
  optimization_plan plan;                 // plan.chosen is the method to apply
  std::vector<trajectory_entry> history;  // the task's trajectory, oldest first
};

// What the repairer knows when it fixes a candidate that failed review.
struct repair_input {
  task_spec task;
  candidate failed;
  review_result review;                   // why it failed
  repair_plan diagnosis;                  // the diagnoser's reading and actions
  std::optional<candidate> last_good;     // the latest correct ancestor, if any
  std::vector<trajectory_entry> history;  // the task's trajectory, oldest first
};

class coder {
 public:
  virtual ~coder() = default;

  // "rules" or "llm".
  virtual std::string name() const = 0;

  // Up to `count` distinct seed candidates for `task` (fewer when the backend has
  // fewer distinct designs; an error when it has none).
  virtual result<std::vector<candidate>> seeds(const task_spec& task, uint32_t count) = 0;

  // A new candidate: in.base with in.plan.chosen applied.
  virtual result<candidate> optimize(const optimize_input& in) = 0;

  // A candidate that should pass where in.failed did not.
  virtual result<candidate> repair(const repair_input& in) = 0;
};

}  // namespace ks
