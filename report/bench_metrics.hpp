#pragma once
// The numbers `kernelskill bench` reports, defined as KernelBench and the paper define
// them, as pure functions of per-problem results, so that each can be checked by hand.
//
// What it promises:
// - a problem counts in every denominator it belongs to: one that failed to import,
//   ended without a correct kernel or failed to export is known to be neither correct nor
//   fast, and counts as such (KernelBench's fast_p divides by all problems);
// - fast_p is the share of problems that are correct (at the strict tolerance) AND
//   faster than p: speedup > p, strictly (score.py's `speed_up > p`);
// - geometric means are taken over the problems that are correct at the strict tolerance
//   and were timed, and say over how many;
// - nothing is made up: where no problem's outcome is known yet (the measurement did
//   not run), every measured number is nullopt, never 0.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/trajectory.hpp"

namespace ks {

// Where a problem stands for one variant.
enum class measure_state {
  pending,    // it has a kernel to measure, and the measurement has not run yet
  no_kernel,  // no kernel to measure (import, run or export failed): not correct
  measured,   // measured side by side (correct or not)
};

// One problem under one variant.
struct problem_measure {
  std::string level;
  measure_state state = measure_state::pending;
  bool correct_strict = false;  // every trial within 1e-4 (KernelBench's fp32 tolerance)
  bool correct_loose = false;   // every trial within 1e-2 (KernelBench v0 and v0.1)
  // Medians in ms; 0: not timed. eager and compile are timed for every problem whose
  // Model ran, with or without a kernel of ours.
  double eager_ms = 0, compile_ms = 0, ours_ms = 0;
};

// baseline / ours; 0 when either time is missing (0) or not finite.
double speedup_of(double baseline_ms, double ours_ms);

// The geometric mean of the positive, finite values; nullopt when there are none.
std::optional<double> geometric_mean(const std::vector<double>& values);

// What a speedup is measured against.
enum class baseline { eager, compile };

// KernelBench's fast_p over `problems` (pending ones left out): the share that are
// correct at the strict tolerance and whose speedup over `b` is greater than p.
// nullopt when no problem's outcome is known.
std::optional<double> fast_p(const std::vector<problem_measure>& problems, double p, baseline b);

// The thresholds reported, as the issue asks: p = 0, 1, 1.5 and 2.
const std::vector<double>& fast_p_thresholds();

struct metric_set {
  size_t problems = 0;  // all of them, pending included
  size_t known = 0;     // measured or known to have no kernel
  size_t measured = 0;
  size_t correct_strict = 0, correct_loose = 0;
  std::optional<double> correct_rate_strict, correct_rate_loose;  // of `known`
  // Over the problems correct at 1e-4 and timed against the baseline.
  std::optional<double> geomean_over_eager, geomean_over_compile;
  size_t geomean_over_eager_n = 0, geomean_over_compile_n = 0;
  // The arithmetic mean of the same speedups over eager (geomean_over_eager_n of them):
  // what the paper reports, beside the geometric mean that one large speedup cannot sway.
  std::optional<double> mean_over_eager;
  // torch.compile against eager, over every problem where both were timed.
  std::optional<double> compile_over_eager;
  size_t compile_over_eager_n = 0;
  std::vector<std::pair<double, std::optional<double>>> fast_p_eager, fast_p_compile;
};
metric_set compute_metrics(const std::vector<problem_measure>& problems);

// The run's best speedup after each round 0..rounds from a task's trajectory: the
// running maximum over the reviews the run could keep (status ok, and not flagged
// the way the seed line refuses: output independent of the input, or a speedup above
// the suspicious threshold; the reviewer names either flag in its message, which the
// entry's summary carries). Round 0 is the seeds (and their repairs). 0 for a round
// before the task's first kept kernel. These are the reviewer's speedups over the
// reference in the run, not the side-by-side's.
std::vector<double> best_by_round(const std::vector<trajectory_entry>& trajectory, uint32_t rounds);

struct round_point {
  uint32_t round = 0;
  size_t tasks = 0;                     // tasks with a kept kernel by this round
  size_t of = 0;                        // tasks in all
  std::optional<double> mean, geomean;  // over those tasks; nullopt when none
};
// Per round, over the tasks' best_by_round rows (each of the same length).
std::vector<round_point> speedup_by_round(const std::vector<std::vector<double>>& per_task);

// The rounds against the seeds (issue 17, item 4): per task, its best after the last
// round over its best seed (round 0), as the run's reviewer measured them.
struct rounds_vs_seeds {
  size_t tasks = 0;         // tasks with a seed kernel (round 0 above 0)
  size_t beat = 0;          // of those, tasks whose rounds found a faster kernel
  size_t beat_by_2pct = 0;  // ... more than 2 % faster (beyond the timing's noise)
  size_t rescued = 0;       // tasks with no seed kernel that a round gave one
  // Over the tasks that beat their seeds: the gains' geometric mean; nullopt when none.
  std::optional<double> geomean_gain;
  // The gains of the tasks that beat their seeds, largest first (ties by name).
  std::vector<std::pair<std::string, double>> gains;
};
rounds_vs_seeds compare_rounds_to_seeds(const std::vector<std::pair<std::string, std::vector<double>>>& per_task);

// One optimisation attempt of a task, as its trajectory records it: a method applied to
// a kernel (a move), and the kernel it made.
struct move_attempt {
  std::string parent;  // the kernel the method was applied to
  std::string method;
  std::string candidate;  // the kernel it made
  friend bool operator==(const move_attempt&, const move_attempt&) = default;
};
// The attempts of a trajectory in order: its review entries that name a method.
std::vector<move_attempt> moves_of(const std::vector<trajectory_entry>& trajectory);

// The run's best speedup after each review that ran (entries with review time: a
// kernel seen before on its line is not reviewed again, and its entry has none), as
// best_by_round counts what the run kept; the budget the variants of an ablation are
// compared at.
std::vector<double> best_by_review(const std::vector<trajectory_entry>& trajectory);

// The moves of a variant's tasks: how many attempts, how many distinct moves (a task,
// a kernel, a method), and how many attempts repeated a move the task had made before.
struct move_counts {
  size_t tasks = 0, attempts = 0, distinct = 0, repeated = 0;
};
using task_moves = std::vector<std::pair<std::string, std::vector<move_attempt>>>;  // task → its attempts
move_counts count_moves(const task_moves& per_task);

// The short-term memory's check of the ablation (issue 48): the moves `without` (the
// variant without short-term memory) made more than once in a task, and which of them
// appear in `with`'s trajectories (the full variant's) of the same task. It holds when
// none does. Moves are compared by task, kernel and method: the rules coder writes the
// same kernel for the same recipe, so a move of one variant is found in another's.
struct repeat_check {
  size_t repeated = 0;                // distinct moves `without` made more than once
  std::vector<std::string> in_other;  // of those, the ones `with` made: "TASK: METHOD on KERNEL"
  bool holds() const { return in_other.empty(); }
};
repeat_check repeats_found_in(const task_moves& without, const task_moves& with);

// Two variants at the same number of reviews: per task (in both), the best speedup of
// `a` and of `b` after n reviews, n the smaller of their review counts; the geometric
// mean of a's over b's. Tasks where either has no kept kernel by then are left out.
struct equal_reviews {
  size_t tasks = 0;
  std::optional<double> geomean;                  // a over b
  double mean_reviews_a = 0, mean_reviews_b = 0;  // over the tasks compared
};
equal_reviews compare_at_equal_reviews(const std::vector<std::pair<std::string, std::vector<double>>>& a,
                                       const std::vector<std::pair<std::string, std::vector<double>>>& b);

}  // namespace ks
