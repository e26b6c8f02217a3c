#include "protocol/wire_safe.hpp"

#include <cfloat>
#include <cmath>

namespace ks {

double wire_safe(double v) {
  if (std::isnan(v)) return DBL_MAX;
  if (std::isinf(v)) return v > 0 ? DBL_MAX : -DBL_MAX;
  return v;
}

void make_wire_safe(review_result& r) {
  r.max_abs_error = wire_safe(r.max_abs_error);
  r.max_rel_error = wire_safe(r.max_rel_error);
  r.speedup = wire_safe(r.speedup);
  for (timing_stats* t : {&r.candidate_time, &r.reference_time}) {
    t->median_ms = wire_safe(t->median_ms);
    t->mean_ms = wire_safe(t->mean_ms);
    t->min_ms = wire_safe(t->min_ms);
    t->max_ms = wire_safe(t->max_ms);
    t->stddev_ms = wire_safe(t->stddev_ms);
  }
  r.profile.duration_ms = wire_safe(r.profile.duration_ms);
  for (auto it = r.profile.values.begin(); it != r.profile.values.end();) {
    if (std::isfinite(it->second))
      ++it;
    else
      it = r.profile.values.erase(it);
  }
}

}  // namespace ks
