#pragma once
// Task runs: what a task coordinator reports while it works and when it ends.

#include <cstdint>
#include <string>

#include "model/candidate.hpp"
#include "model/fields.hpp"
#include "model/review.hpp"

namespace ks {

// A task's state as its coordinator last reported it. state: queued, generating,
// reviewing, repairing, planning, optimizing, done, failed.
struct task_progress {
  std::string task;
  std::string state;
  uint32_t round = 0;
  uint32_t reviews = 0;
  double best_speedup = 0;  // of the best correct candidate so far; 0: none yet
  std::string best_candidate;
  std::string detail;  // one line for people: what just happened
  friend bool operator==(const task_progress&, const task_progress&) = default;
};
template <class F>
auto visit_fields(task_progress& x, F&& f) {
  return f("task_progress", KS_FIELD(task), KS_FIELD(state), KS_FIELD(round), KS_FIELD(reviews), KS_FIELD(best_speedup),
           KS_FIELD(best_candidate), KS_FIELD(detail));
}

// How one task's run ended. success: a correct kernel was found (best/best_review
// hold it). reason says how the run stopped ("round budget spent", "no allowed
// method left", or why it failed).
struct task_outcome {
  std::string task;
  bool success = false;
  std::string reason;
  candidate best;
  review_result best_review;
  uint32_t rounds = 0;  // optimisation rounds run, over all seed lines
  uint32_t reviews = 0;
  review_phases review_time;  // the phase times of those reviews, summed
  uint32_t agent_restarts = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  double wall_s = 0;
  friend bool operator==(const task_outcome&, const task_outcome&) = default;
};
template <class F>
auto visit_fields(task_outcome& x, F&& f) {
  return f("task_outcome", KS_FIELD(task), KS_FIELD(success), KS_FIELD(reason), KS_FIELD(best), KS_FIELD(best_review),
           KS_FIELD(rounds), KS_FIELD(reviews), KS_FIELD(review_time), KS_FIELD(agent_restarts), KS_FIELD(input_tokens),
           KS_FIELD(output_tokens), KS_FIELD(cost_usd), KS_FIELD(wall_s));
}

}  // namespace ks
