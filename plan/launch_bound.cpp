#include "plan/launch_bound.hpp"

#include <algorithm>

#include "base/number_format.hpp"

namespace ks {

plan_weight weigh_plan(const resolved_plan& plan, uint64_t tensor_bytes) {
  plan_weight w;
  w.bytes = tensor_bytes;
  for (const auto* list : {&plan.outputs, &plan.scratch, &plan.intermediates})
    for (const auto& b : *list) w.bytes += static_cast<uint64_t>(std::max<int64_t>(b.bytes(), 0));
  for (const auto& s : plan.steps) {
    if (s.kind == "kernel")
      ++w.kernel_launches;
    else
      ++w.library_steps;
  }
  return w;
}

bool launch_bound(const plan_weight& w, const graph_rule& rule) {
  const size_t steps = w.steps();
  return steps >= rule.min_steps && steps > 0 && w.bytes / steps <= rule.max_bytes_per_step;
}

std::string describe_weight(const plan_weight& w) {
  const size_t steps = std::max<size_t>(w.steps(), 1);
  auto mb = [](uint64_t bytes) { return short_g(static_cast<double>(bytes) / 1e6) + " MB"; };
  return std::to_string(w.kernel_launches) + " kernel launches and " + std::to_string(w.library_steps) +
         " library steps moving " + mb(w.bytes) + " (" + mb(w.bytes / steps) + " a step)";
}

}  // namespace ks
