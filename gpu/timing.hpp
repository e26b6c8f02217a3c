#pragma once
// How the reviewer times a program: the policy (warm-up, how many repetitions, when a
// median counts as stable, the time bound), the statistics it reports, and the
// measurement loop itself, which takes the timed run as a function so that it can be
// tested without a GPU. The GPU half (CUDA events, the L2 flush) is in reviewer.cpp.
//
// A measurement alternates its two programs (candidate, reference, candidate, …) so
// that both see the same clocks and the same temperature, and stops when both medians
// are stable, or at the repetition or time bound, whichever comes first.

#include <cstdint>
#include <functional>
#include <vector>

#include "base/result.hpp"
#include "model/review.hpp"

namespace ks {

struct timing_options {
  uint32_t warmup_runs = 3;  // untimed runs of each program before sampling
  uint32_t min_runs = 10;    // samples of each program before stability is judged
  uint32_t max_runs = 500;   // samples of each program at most
  double max_seconds = 4.0;  // wall-clock bound for one measurement (both programs,
                             // warm-up and L2 flushes included); at least one sample
                             // of each program is always taken
  // Stable: the interquartile range's half-width is below this fraction of the median.
  double stable_rel_iqr = 0.02;
  bool flush_l2 = true;  // overwrite a buffer of 2x the L2 size before every sample
};

// The q-quantile (0 <= q <= 1) of `sorted` (ascending), interpolating linearly between
// neighbours (numpy's default). 0 for an empty vector.
double quantile_sorted(const std::vector<double>& sorted, double q);

// Median, mean, min, max, sample standard deviation (n - 1) and count of `ms`.
timing_stats summarize_times(const std::vector<double>& ms);

// (q3 - q1) / 2 / median: the relative half-width of the interquartile range.
// Infinity when there are no samples or the median is not positive.
double relative_iqr(const std::vector<double>& ms);

// At least opts.min_runs samples and relative_iqr below opts.stable_rel_iqr.
bool is_stable(const std::vector<double>& ms, const timing_options& opts);

// One timed run of a program: its time in milliseconds, or why it could not run.
using timed_run = std::function<result<double>()>;

// The outcome of measuring one program.
struct measurement {
  timing_stats stats;
  std::vector<double> samples_ms;  // in the order taken
  bool stable = false;             // is_stable() held when the loop stopped
  double rel_iqr = 0;
};

// Measures `a` and `b` alternately: opts.warmup_runs untimed runs of each (their
// results discarded, errors not), then samples a, b, a, b, … until both are stable, or
// opts.max_runs samples each, or opts.max_seconds have passed. `now_s` is the clock
// (seconds; steady_clock when empty), replaceable for tests. The first error of
// either run ends the measurement.
result<std::pair<measurement, measurement>> measure_pair(const timing_options& opts, const timed_run& a,
                                                         const timed_run& b, const std::function<double()>& now_s = {});

}  // namespace ks
