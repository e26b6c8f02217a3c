#pragma once
// A seed line's checkpoint in the store (coordinator_options::resume): where the line
// stood after its last completed round, or that it ended and why; and the record of
// the task's seeds. Both live in the store's tasks column family under
// checkpoint_prefix(task).
//
// What it promises:
// - kernels are referred to by id (they are in the kernels column family), so a
//   checkpoint is small and written after every round;
// - a record is read back exactly as it was written (schema ks.line_checkpoint/1), and
//   one that cannot be read is an error, never a half-filled checkpoint.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "model/review.hpp"

namespace ks {

// A seed line's state after a completed round, or its end (see coordinator_options::
// resume). Kernels are referred to by id: they are in the store's kernels family.
struct line_checkpoint {
  uint32_t round = 0;
  uint32_t reviews = 0;
  review_phases review_time;  // the phase times of those reviews, summed
  int restarts = 0;
  std::string cur, best;  // kernel ids; best is empty before the first correct kernel
  review_result cur_review, best_review;
  bool finished = false;  // the line ended; reason says why
  std::string reason;
};

// The store ids: line `line`'s checkpoint, and the task's seeds.
std::string line_key(const std::string& task, size_t line);
std::string seeds_key(const std::string& task);

nlohmann::json to_record(const line_checkpoint& c);
result<line_checkpoint> checkpoint_from(const nlohmann::json& j);

}  // namespace ks
