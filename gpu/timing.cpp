#include "gpu/timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace ks {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

timing_stats summarize_times(const std::vector<double>& ms) {
  timing_stats s;
  s.repetitions = static_cast<uint32_t>(ms.size());
  if (ms.empty()) return s;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  s.median_ms = quantile_sorted(sorted, 0.5);
  s.min_ms = sorted.front();
  s.max_ms = sorted.back();
  s.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  if (ms.size() > 1) {
    double ss = 0;
    for (double v : ms) ss += (v - s.mean_ms) * (v - s.mean_ms);
    s.stddev_ms = std::sqrt(ss / static_cast<double>(ms.size() - 1));
  }
  return s;
}

double relative_iqr(const std::vector<double>& ms) {
  if (ms.empty()) return std::numeric_limits<double>::infinity();
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = quantile_sorted(sorted, 0.5);
  if (!(median > 0)) return std::numeric_limits<double>::infinity();
  return (quantile_sorted(sorted, 0.75) - quantile_sorted(sorted, 0.25)) / 2 / median;
}

bool is_stable(const std::vector<double>& ms, const timing_options& opts) {
  return ms.size() >= std::max<uint32_t>(opts.min_runs, 1) && relative_iqr(ms) < opts.stable_rel_iqr;
}

result<std::pair<measurement, measurement>> measure_pair(const timing_options& opts, const timed_run& a,
                                                         const timed_run& b, const std::function<double()>& now_s) {
  auto clock = now_s ? now_s : [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  const double t0 = clock();
  for (uint32_t i = 0; i < opts.warmup_runs; ++i) {
    if (auto r = a(); !r) return r.error();
    if (auto r = b(); !r) return r.error();
  }
  measurement ma, mb;
  const uint32_t max_runs = std::max<uint32_t>(opts.max_runs, 1);
  while (ma.samples_ms.size() < max_runs) {
    auto ra = a();
    if (!ra) return ra.error();
    ma.samples_ms.push_back(*ra);
    auto rb = b();
    if (!rb) return rb.error();
    mb.samples_ms.push_back(*rb);
    if (is_stable(ma.samples_ms, opts) && is_stable(mb.samples_ms, opts)) break;
    if (clock() - t0 >= opts.max_seconds) break;
  }
  for (measurement* m : {&ma, &mb}) {
    m->stats = summarize_times(m->samples_ms);
    m->rel_iqr = relative_iqr(m->samples_ms);
    m->stable = is_stable(m->samples_ms, opts);
  }
  return std::make_pair(std::move(ma), std::move(mb));
}

}  // namespace ks
