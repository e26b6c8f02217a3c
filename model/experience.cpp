#include "model/experience.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace ks {

double realized_gain(const experience_record& r) {
  if (!r.correct || !(r.speedup_before > 0) || !(r.speedup_after > 0) || !std::isfinite(r.speedup_before) ||
      !std::isfinite(r.speedup_after))
    return 1.0;
  return std::max(1.0, r.speedup_after / r.speedup_before);
}

std::vector<method_stats> summarize_experience(const std::vector<experience_record>& records,
                                               const std::string& bottleneck,
                                               const std::optional<std::string>& template_name,
                                               const std::string& other_than) {
  struct acc {
    method_stats stats;
    double log_sum = 0;
    uint32_t ratios = 0;
    double realized_log_sum = 0;
  };
  std::map<std::pair<std::string, std::string>, acc> groups;
  for (const auto& r : records) {
    if (!bottleneck.empty() && r.bottleneck_class != bottleneck) continue;
    if (template_name && !r.template_name.empty() && r.template_name != *template_name) continue;
    if (!other_than.empty() && r.task == other_than) continue;
    auto& g = groups[{r.method, r.bottleneck_class}];
    g.stats.method = r.method;
    g.stats.bottleneck_class = r.bottleneck_class;
    ++g.stats.applied;
    g.realized_log_sum += std::log(realized_gain(r));
    if (!r.correct) continue;
    ++g.stats.correct;
    if (r.speedup_after > r.speedup_before) ++g.stats.improved;
    if (r.speedup_before > 0 && r.speedup_after > 0 && std::isfinite(r.speedup_before) &&
        std::isfinite(r.speedup_after)) {
      double ratio = r.speedup_after / r.speedup_before;
      g.log_sum += std::log(ratio);
      ++g.ratios;
      g.stats.best_gain = std::max(g.stats.best_gain, ratio);
    }
  }
  std::vector<method_stats> out;
  for (auto& [key, g] : groups) {
    if (g.ratios > 0) g.stats.mean_gain = std::exp(g.log_sum / g.ratios);
    if (g.stats.applied > 0) g.stats.realized_gain = std::exp(g.realized_log_sum / g.stats.applied);
    out.push_back(std::move(g.stats));
  }
  return out;
}

}  // namespace ks
