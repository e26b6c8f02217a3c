#pragma once
// What `kernelskill bench` leaves behind in its output directory, as text: summary.json,
// summary.md and the pictures (SVG), made from one bench_report that the command
// gathers from its steps' files. Pure functions: the same report gives the same bytes.
//
// What it promises:
// - every number comes from the report (report/bench_metrics.hpp computes them), per
//   variant, per level and over all problems; a number that was not measured is
//   written as null in JSON and "-" in Markdown, never as 0;
// - the measurement's status is said first (measured, partly measured, or not measured
//   and why), so nobody reads a run's numbers as a side-by-side measurement;
// - the speedup by round, and the rounds against the seeds, are labelled as what they
//   are: the run's own reviews;
// - pictures are made only from data that exists: the distribution and the ablation
//   charts need measured problems, the ablation chart two variants or more.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/bench_metrics.hpp"

namespace ks {

// One problem under one variant: what the run, the export and the measurement gave.
struct bench_cell {
  bool run_done = false;  // the run wrote the task's outcome
  bool run_success = false;
  std::string run_reason;
  double run_speedup = 0;  // the run's own review of its best kernel
  uint32_t rounds = 0;
  uint32_t reviews = 0;  // the reviews the run spent on the task
  bool exported = false;
  std::string export_error;
  measure_state state = measure_state::pending;
  bool correct_strict = false, correct_loose = false;
  uint32_t trials = 0, passed_strict = 0, passed_loose = 0;
  double max_abs_error = 0;
  double ours_ms = 0;
  std::string error;  // the measurement's, for ours (build, construction, a run that raised)
  // What the model cost for this task (the run's outcome; 0 for the rules coder).
  int64_t input_tokens = 0, output_tokens = 0;
  double cost_usd = 0;
};

struct bench_problem {
  std::string key;                      // LEVEL/NAME
  std::string name;                     // the task's name (the file's stem)
  std::string level;                    // "level1", …
  std::string file;                     // the problem file as given
  std::string import_error;             // non-empty: it was not imported
  double eager_ms = 0, compile_ms = 0;  // medians; 0: not timed
  std::string compile_error;            // torch.compile failed or timed out
  // torch.compile's own outputs against eager's, on ours' trials (0 trials: not checked).
  uint32_t compile_trials = 0, compile_passed_strict = 0;
  double compile_max_abs_error = 0;
  bool compile_correct_strict() const { return compile_trials > 0 && compile_passed_strict == compile_trials; }
  std::string error;              // the problem's own Model failed in the measurement
  std::vector<bench_cell> cells;  // one per variant, in the report's variant order
};

struct bench_variant {
  std::string name;  // full, no-ltm, no-stm, no-ltm-stm
  bool long_term_memory = true, short_term_memory = true;
  std::vector<round_point> rounds;  // the run's mean best speedup after each round
  rounds_vs_seeds vs_seeds;         // each task's last round against its seeds
  // The moves of its tasks' trajectories (attempts, distinct, repeated); `moves_known`
  // is false where the run step's rounds.json predates them.
  move_counts moves;
  bool moves_known = false;
  // The full variant against this one at the same number of reviews (not for full
  // itself, nor without a full variant or review data).
  std::optional<equal_reviews> full_vs_this;
};

struct bench_report {
  std::string out_dir;
  std::vector<bench_variant> variants;
  std::vector<bench_problem> problems;
  // How the side-by-side measurement stands, for people: "measured", or why not.
  std::string measurement = "not run";
  bool measurement_ran = false;
  std::string device, torch_version;
  int reps = 0, trials = 0;
  std::string coder;
  int seeds = 0, rounds = 0;
  // With the variants full and no-stm: whether no-stm repeated a move that full's
  // trajectories hold (report/bench_metrics.hpp, repeats_found_in).
  std::optional<repeat_check> stm_check;
};

// The levels in first-seen order.
std::vector<std::string> report_levels(const bench_report& r);
// The measures of variant `v` for the problems of `level` (empty: all).
std::vector<problem_measure> measures_of(const bench_report& r, size_t v, const std::string& level);

nlohmann::json bench_summary_json(const bench_report& r);
std::string bench_summary_markdown(const bench_report& r);
// The speedup by round of every variant as CSV (variant, round, tasks, of, mean,
// geomean; empty where there is no value): the curve's data for a page to draw.
std::string speedup_by_round_csv(const bench_report& r);
// Where one bench's rows come from, for docs/results: the run's name, the date
// (YYYY-MM-DD), the commit of the kernelskill that ran (7+ hex digits, or "unknown"
// with `commit_note` saying why).
struct results_origin {
  std::string run, date, commit, commit_note;
};
// Variant `v`'s per-problem rows in docs/results' CSV format (scripts/results_page.py:
// run,date,commit,device,level,problem,eager_ms,compile_ms,ours_ms,over_eager,
// over_compile,correct,correct_1e-2,review_speedup,rounds,max_abs_error,reverted,note),
// the header first, one row per problem in the report's order, so that a run's rows
// append to docs/results/kernelbench.csv as they are. Times only where measured;
// `correct` yes/no where the outcome is known (a problem without a kernel is "no"),
// empty while pending; the note carries every error the summary names. The device
// column is the measurement's device, or "none (not measured)".
std::string bench_results_csv(const bench_report& r, size_t v, const results_origin& origin);
// The pictures: (file name, SVG text), only those the data allows.
std::vector<std::pair<std::string, std::string>> bench_pictures(const bench_report& r);

}  // namespace ks
