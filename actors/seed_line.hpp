#pragma once
// One seed line of a task (actors/task_coordinator.hpp, "The method"): from its seed
// kernel, or from its checkpoint, through review, diagnosis and repair, features,
// plan and optimisation, round by round, until its budget is spent or nothing is left
// to try. Its progress goes to the coordinator as task_progress messages, its outcome
// as one task_outcome.
//
// The line is a machine of named states, one transition function each (seed_line.cpp);
// what a state hands to the next is the line's state struct (the kernel it stands on,
// its verdict, the method and class it is an attempt of, the repairs so far, the
// diagnosis, features and plan at hand):
//
//                 ┌──────── the repaired kernel, or back to the best ────────┐
//                 ▼                                                          │
//   seed ──────► REVIEW ───── failed, repairs left ────► DIAGNOSE ──► REPAIR ┘
//   checkpoint ─► │ ⟲ failed, no repair left: back to the best
//                 │
//                 │ correct: the best so far, or slower: back to the best
//                 ▼
//             FEATURES ──► PLAN ──► OPTIMIZE ── the attempt ──► REVIEW
//                           │          │
//                           ▼          ▼
//                          DONE ◄──────┘     (and from the others: see the table)
//
// Every transition and its condition:
//   review   → done      cancelled; failed with no best kernel to go back to (the
//                        reviewer failed, or the repairs of the seed are spent)
//            → review    failed with no repair left, or the reviewer failed: back to
//                        the best, whose verdict is known (it is not reviewed again)
//            → diagnose  failed or flagged, repairs left
//            → features  correct: the best so far, or slower than the best: back to it
//   diagnose → repair
//   repair   → review    the repaired kernel; or back to the best when the repairer
//                        could not fix it or gave back the best itself
//            → done      the repairer could not fix the seed (no best)
//   features → plan      the round is complete: the line's checkpoint is written
//   plan     → optimize
//            → done      round budget spent; no allowed method left
//   optimize → review    the attempt of the first ranked method that applied
//            → done      none of the first methods_per_round applied
//   any      → done      its agent failed, or was given up after max_agent_restarts
// A line resumed from its checkpoint starts in review with the checkpoint's kernel and
// verdict (its last completed round); one whose checkpoint says it ended, or whose
// kernels cannot be read back, is done.
// Done writes the line's final checkpoint (finished, with the reason).
//
// What it promises: what task_coordinator.hpp promises of each line (everything
// written to the store before the line moves on, supervision of its agents, a flagged
// review never taken as the best); its entries and progress are written by
// actors/line_recorder.hpp.
//
// Stopping: before each step the line looks for an exit message (a blocking actor's
// exits are ordinary messages, which nothing else here would read) and at its
// context's `stopping` flag. Either stops it there, between two steps: it writes
// nothing more (no final checkpoint: a restarted line resumes from its last completed
// round), sends no outcome, and quits with the exit's reason (user_shutdown for the
// flag). A step under way (a review, an agent's call) ends first.

#include <atomic>
#include <memory>
#include <optional>

#include <caf/fwd.hpp>

#include "actors/line_checkpoint.hpp"
#include "actors/review_board.hpp"
#include "actors/task_coordinator.hpp"

namespace ks {

// What every line shares (read-only, or thread-safe: store, compiler, backend).
struct line_context {
  coordinator_options opts;
  reviewer_actor reviewer;
  // Set by the coordinator when it is going (killed, or an exception): its lines stop
  // at their next step, writing nothing more.
  std::shared_ptr<std::atomic<bool>> stopping = std::make_shared<std::atomic<bool>>(false);
  // The kernels the lines have reviewed or are reviewing, with their verdicts: read
  // only with short-term memory (review_board.hpp).
  std::shared_ptr<review_board> reviews = std::make_shared<review_board>();
};

// Runs one line from `seed`, or from `resume_from` when given, on a blocking actor of
// its own; sends its task_progress and then its task_outcome to `coordinator`.
void seed_line_actor(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx, candidate seed, size_t index,
                     std::optional<line_checkpoint> resume_from, caf::actor coordinator);

}  // namespace ks
