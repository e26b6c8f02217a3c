#pragma once
// What `kernelskill run` leaves behind: an output directory a person (or a script)
// reads after an experiment.
//
//   OUT/summary.md, OUT/summary.json   one row per task: success, speedup over eager,
//                                      rounds, reviews, tokens in and out, cost, why
//                                      it stopped; the reviews' phase times, per task
//                                      and summed; the run's token bill (json: llm)
//   OUT/tasks/TASK/kernel.cu           the best correct kernel's source
//   OUT/tasks/TASK/plan.yaml           its launch plan
//   OUT/tasks/TASK/review.json         its review (timings, errors, profile, flags)
//   OUT/tasks/TASK/outcome.json        the task's outcome (as in summary.json)
//   OUT/tasks/TASK/trajectory.txt      the task's trajectory as a timeline
//
// Files are written to a temporary name and renamed, so a crash never leaves a
// half-written file; a task's files are written when the task ends, the summary after
// every task (so it is current while the experiment runs).

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "model/run.hpp"
#include "model/trajectory.hpp"

namespace ks {

struct run_summary {
  std::string experiment;
  std::string coder;                   // backend name
  std::vector<task_outcome> outcomes;  // in the config's task order
  std::vector<std::string> pending;    // tasks not finished yet
  double wall_s = 0;
  uint32_t devices = 0;  // GPUs that reviewed (0: not known)
};

// Throughput of a run: finished tasks per hour of its wall time, and the share of the
// devices' wall time spent reviewing (summed review phases / (wall × devices); the
// rest is the devices waiting for candidates). 0 where not defined.
double tasks_per_hour(const run_summary& summary);
double device_busy_fraction(const run_summary& summary);

// Writes `text` to PATH.tmp and renames it to `path` (creating the directory): a reader
// or a crash never sees half a file.
status write_file_atomically(const std::filesystem::path& path, const std::string& text);

// The files of one finished task.
status write_task_result(const std::filesystem::path& out_dir, const task_outcome& outcome,
                         const std::vector<trajectory_entry>& trajectory);

// summary.md and summary.json.
status write_summary(const std::filesystem::path& out_dir, const run_summary& summary);

nlohmann::json outcome_to_json(const task_outcome& o);
std::string summary_markdown(const run_summary& summary);

// A review_phases as JSON: its fields, plus total_s.
nlohmann::json phases_to_json(const review_phases& p);
// The phase times of every review of the finished tasks, summed.
review_phases total_review_time(const std::vector<task_outcome>& outcomes);

// The geometric mean of the speedups of the successful tasks (0 when none).
double geomean_speedup(const std::vector<task_outcome>& outcomes);

// A task name made safe as a directory name (letters, digits, '.', '-', '_').
std::string safe_name(const std::string& name);

}  // namespace ks
