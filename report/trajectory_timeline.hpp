#pragma once
// A task's trajectory (short-term memory) as a timeline people read: one block per
// round, one line per entry with its kind, method, candidate ← parent, review status
// and speedup, and the entry's summary under it (a review's phase times under that).
// Used by `kernelskill trajectory` and by the run report.

#include <string>
#include <vector>

#include "model/trajectory.hpp"

namespace ks {

// entries in seq order; task names the heading.
std::string render_trajectory(const std::string& task, const std::vector<trajectory_entry>& entries);

// "2026-11-29 19:41:08" (UTC) for a Unix time in milliseconds.
std::string utc_time(int64_t unix_ms);

}  // namespace ks
