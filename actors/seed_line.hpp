#pragma once
// One seed line of a task (actors/task_coordinator.hpp, "The method"): from its seed
// kernel, or from its checkpoint, through review, diagnosis and repair, features,
// plan and optimisation, round by round, until its budget is spent or nothing is left
// to try. Its progress goes to the coordinator as task_progress messages, its outcome
// as one task_outcome.
//
// What it promises: what task_coordinator.hpp promises of each line (everything
// written to the store before the line moves on, supervision of its agents, a flagged
// review never taken as the best).

#include <memory>
#include <optional>

#include <caf/fwd.hpp>

#include "actors/line_checkpoint.hpp"
#include "actors/task_coordinator.hpp"

namespace ks {

// What every line shares (read-only, or thread-safe: store, compiler, backend).
struct line_context {
  coordinator_options opts;
  reviewer_actor reviewer;
};

// Runs one line from `seed`, or from `resume_from` when given, on a blocking actor of
// its own; sends its task_progress and then its task_outcome to `coordinator`.
void seed_line_actor(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx,
                     candidate seed, size_t index, std::optional<line_checkpoint> resume_from,
                     caf::actor coordinator);

}  // namespace ks
