#pragma once
// Short-term memory: the events of one task's run.

#include <cstdint>
#include <map>
#include <string>

#include "model/fields.hpp"
#include "model/review.hpp"

namespace ks {

// One event of a task's trajectory (short-term memory). Append-only, numbered by seq.
struct trajectory_entry {
  std::string task;
  uint64_t seq = 0;
  int64_t unix_ms = 0;
  uint32_t round = 0;
  std::string kind;  // seed, review, diagnose, repair, plan, optimize, note
  std::string candidate_id;
  std::string parent_id;
  std::string method;  // method applied or repair action, if any
  review_status status = review_status::ok;
  double speedup = 0;
  std::string summary;
  std::map<std::string, double> metrics;
  review_phases phases;  // kind review: where the review's time went (0 when it did not run)
  friend bool operator==(const trajectory_entry&, const trajectory_entry&) = default;
};
template <class F>
auto visit_fields(trajectory_entry& x, F&& f) {
  return f("trajectory_entry", KS_FIELD(task), KS_FIELD(seq), KS_FIELD(unix_ms), KS_FIELD(round), KS_FIELD(kind),
           KS_FIELD(candidate_id), KS_FIELD(parent_id), KS_FIELD(method), KS_FIELD(status), KS_FIELD(speedup),
           KS_FIELD(summary), KS_FIELD(metrics), KS_FIELD(phases));
}

// An error reported as a reply (an agent or worker could not do what was asked).

}  // namespace ks
