#include "report/bench_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace ks {

double speedup_of(double baseline_ms, double ours_ms) {
  if (!(baseline_ms > 0) || !(ours_ms > 0) || !std::isfinite(baseline_ms) || !std::isfinite(ours_ms)) return 0;
  return baseline_ms / ours_ms;
}

std::optional<double> geometric_mean(const std::vector<double>& values) {
  double log_sum = 0;
  size_t n = 0;
  for (double v : values)
    if (v > 0 && std::isfinite(v)) {
      log_sum += std::log(v);
      ++n;
    }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / static_cast<double>(n));
}

namespace {

double baseline_ms(const problem_measure& m, baseline b) { return b == baseline::eager ? m.eager_ms : m.compile_ms; }

}  // namespace

std::optional<double> fast_p(const std::vector<problem_measure>& problems, double p, baseline b) {
  size_t known = 0, fast = 0;
  for (const auto& m : problems) {
    if (m.state == measure_state::pending) continue;
    ++known;
    if (m.state == measure_state::measured && m.correct_strict && speedup_of(baseline_ms(m, b), m.ours_ms) > p) ++fast;
  }
  if (known == 0) return std::nullopt;
  return static_cast<double>(fast) / static_cast<double>(known);
}

const std::vector<double>& fast_p_thresholds() {
  static const std::vector<double> ps = {0.0, 1.0, 1.5, 2.0};
  return ps;
}

metric_set compute_metrics(const std::vector<problem_measure>& problems) {
  metric_set s;
  s.problems = problems.size();
  std::vector<double> over_eager, over_compile, compile_eager;
  for (const auto& m : problems) {
    if (m.eager_ms > 0 && m.compile_ms > 0) compile_eager.push_back(speedup_of(m.eager_ms, m.compile_ms));
    if (m.state == measure_state::pending) continue;
    ++s.known;
    if (m.state != measure_state::measured) continue;
    ++s.measured;
    s.correct_strict += m.correct_strict;
    s.correct_loose += m.correct_loose;
    if (!m.correct_strict) continue;
    if (double x = speedup_of(m.eager_ms, m.ours_ms); x > 0) over_eager.push_back(x);
    if (double x = speedup_of(m.compile_ms, m.ours_ms); x > 0) over_compile.push_back(x);
  }
  if (s.known > 0) {
    s.correct_rate_strict = static_cast<double>(s.correct_strict) / static_cast<double>(s.known);
    s.correct_rate_loose = static_cast<double>(s.correct_loose) / static_cast<double>(s.known);
  }
  s.geomean_over_eager = geometric_mean(over_eager);
  if (!over_eager.empty()) {
    double sum = 0;
    for (double x : over_eager) sum += x;
    s.mean_over_eager = sum / static_cast<double>(over_eager.size());
  }
  s.geomean_over_eager_n = over_eager.size();
  s.geomean_over_compile = geometric_mean(over_compile);
  s.geomean_over_compile_n = over_compile.size();
  s.compile_over_eager = geometric_mean(compile_eager);
  s.compile_over_eager_n = compile_eager.size();
  for (double p : fast_p_thresholds()) {
    s.fast_p_eager.emplace_back(p, fast_p(problems, p, baseline::eager));
    s.fast_p_compile.emplace_back(p, fast_p(problems, p, baseline::compile));
  }
  return s;
}

namespace {

// The reviewer names a disqualifying flag in its message ("Flag speedup_above_threshold:
// …"), and the review's trajectory entry carries the message in its summary; the seed
// line never keeps such a kernel (actors/seed_line.cpp, disqualifying_flag).
bool kept_by_the_run(const trajectory_entry& e) {
  if (e.kind != "review" || e.status != review_status::ok || !(e.speedup > 0) || !std::isfinite(e.speedup))
    return false;
  for (const char* flag : {"Flag output_independent_of_input", "Flag speedup_above_threshold"})
    if (e.summary.find(flag) != std::string::npos) return false;
  return true;
}

}  // namespace

std::vector<double> best_by_round(const std::vector<trajectory_entry>& trajectory, uint32_t rounds) {
  std::vector<double> best(rounds + 1, 0.0);
  for (const auto& e : trajectory) {
    if (!kept_by_the_run(e)) continue;
    const uint32_t r = std::min(e.round, rounds);
    best[r] = std::max(best[r], e.speedup);
  }
  for (uint32_t r = 1; r <= rounds; ++r) best[r] = std::max(best[r], best[r - 1]);
  return best;
}

std::vector<round_point> speedup_by_round(const std::vector<std::vector<double>>& per_task) {
  size_t rounds = 0;
  for (const auto& t : per_task) rounds = std::max(rounds, t.size());
  std::vector<round_point> out;
  for (size_t r = 0; r < rounds; ++r) {
    round_point p;
    p.round = static_cast<uint32_t>(r);
    p.of = per_task.size();
    std::vector<double> values;
    double sum = 0;
    for (const auto& t : per_task)
      if (r < t.size() && t[r] > 0) {
        values.push_back(t[r]);
        sum += t[r];
      }
    p.tasks = values.size();
    if (!values.empty()) p.mean = sum / static_cast<double>(values.size());
    p.geomean = geometric_mean(values);
    out.push_back(p);
  }
  return out;
}

rounds_vs_seeds compare_rounds_to_seeds(const std::vector<std::pair<std::string, std::vector<double>>>& per_task) {
  rounds_vs_seeds out;
  std::vector<double> gains;
  for (const auto& [name, best] : per_task) {
    if (best.empty()) continue;
    const double seed = best.front(), last = best.back();
    if (seed <= 0) {
      out.rescued += last > 0;
      continue;
    }
    ++out.tasks;
    if (last <= seed) continue;
    ++out.beat;
    out.beat_by_2pct += last > seed * 1.02;
    gains.push_back(last / seed);
    out.gains.emplace_back(name, last / seed);
  }
  out.geomean_gain = geometric_mean(gains);
  std::sort(out.gains.begin(), out.gains.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

std::vector<move_attempt> moves_of(const std::vector<trajectory_entry>& trajectory) {
  std::vector<move_attempt> out;
  for (const auto& e : trajectory)
    if (e.kind == "review" && !e.method.empty()) out.push_back({e.parent_id, e.method, e.candidate_id});
  return out;
}

std::vector<double> best_by_review(const std::vector<trajectory_entry>& trajectory) {
  std::vector<double> out;
  double best = 0;
  for (const auto& e : trajectory) {
    if (e.kind != "review" || !(e.phases.total_s() > 0)) continue;
    if (kept_by_the_run(e)) best = std::max(best, e.speedup);
    out.push_back(best);
  }
  return out;
}

move_counts count_moves(const task_moves& per_task) {
  move_counts c;
  for (const auto& [task, moves] : per_task) {
    ++c.tasks;
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& m : moves) {
      ++c.attempts;
      if (seen.insert({m.parent, m.method}).second)
        ++c.distinct;
      else
        ++c.repeated;
    }
  }
  return c;
}

repeat_check repeats_found_in(const task_moves& without, const task_moves& with) {
  std::map<std::string, std::set<std::pair<std::string, std::string>>> made;
  for (const auto& [task, moves] : with)
    for (const auto& m : moves) made[task].insert({m.parent, m.method});
  repeat_check r;
  for (const auto& [task, moves] : without) {
    std::map<std::pair<std::string, std::string>, int> times;
    for (const auto& m : moves) ++times[{m.parent, m.method}];
    for (const auto& [move, n] : times) {
      if (n < 2) continue;
      ++r.repeated;
      auto it = made.find(task);
      if (it != made.end() && it->second.count(move))
        r.in_other.push_back(task + ": " + move.second + " on " + move.first.substr(0, 12));
    }
  }
  return r;
}

equal_reviews compare_at_equal_reviews(const std::vector<std::pair<std::string, std::vector<double>>>& a,
                                       const std::vector<std::pair<std::string, std::vector<double>>>& b) {
  equal_reviews out;
  std::map<std::string, const std::vector<double>*> other;
  for (const auto& [name, best] : b) other[name] = &best;
  std::vector<double> ratios;
  double ra = 0, rb = 0;
  for (const auto& [name, best] : a) {
    auto it = other.find(name);
    if (it == other.end()) continue;
    const size_t n = std::min(best.size(), it->second->size());
    if (n == 0) continue;
    const double x = best[n - 1], y = (*it->second)[n - 1];
    if (!(x > 0) || !(y > 0)) continue;
    ratios.push_back(x / y);
    ra += static_cast<double>(best.size());
    rb += static_cast<double>(it->second->size());
  }
  out.tasks = ratios.size();
  out.geomean = geometric_mean(ratios);
  if (!ratios.empty()) {
    out.mean_reviews_a = ra / static_cast<double>(ratios.size());
    out.mean_reviews_b = rb / static_cast<double>(ratios.size());
  }
  return out;
}

}  // namespace ks
