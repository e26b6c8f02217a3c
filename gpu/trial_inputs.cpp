// Trial inputs: the second distribution of odd trials (gpu/trial_inputs.hpp).
#include "gpu/trial_inputs.hpp"

#include <algorithm>
#include <cmath>

#include "base/number_format.hpp"

namespace ks {

namespace {

bool is_float_dtype(const std::string& dtype) {
  return dtype == "float32" || dtype == "float16" || dtype == "bfloat16" || dtype == "float64";
}

}  // namespace

std::string describe_distribution(const distribution_spec& d) {
  if (d.kind == "normal") return "normal(" + plain_g(d.mean) + ", " + plain_g(d.std) + ")";
  if (d.kind == "uniform" || d.kind == "randint") return d.kind + "(" + plain_g(d.low) + ", " + plain_g(d.high) + ")";
  if (d.kind == "constant") return "constant(" + plain_g(d.value) + ")";
  return d.kind;
}

distribution_spec alternative_distribution(const tensor_spec& spec, uint32_t variant) {
  distribution_spec d = spec.init;
  if (!is_float_dtype(spec.dtype)) return d;
  double lo = 0, hi = 0;
  if (d.kind == "normal") {
    if (!(d.std > 0)) return d;
    distribution_spec u;
    if (variant % 2 == 0) {
      u.kind = "normal";
      u.mean = d.mean;
      u.std = 4 * d.std;
    } else {
      u.kind = "uniform";
      u.low = d.mean - 3 * d.std;
      u.high = d.mean + 3 * d.std;
    }
    return u;
  }
  if (d.kind == "uniform") {
    lo = d.low;
    hi = d.high;
  } else if (d.kind == "kaiming_uniform") {
    int64_t fan_in = 1;
    for (size_t i = 1; i < spec.shape.size(); ++i) fan_in *= spec.shape[i];
    hi = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
    lo = -hi;
  } else {
    return d;
  }
  if (!(hi > lo)) return d;
  distribution_spec u;
  u.kind = "uniform";
  const double quarter = (hi - lo) / 4;
  u.low = variant % 2 == 0 ? lo : hi - quarter;
  u.high = variant % 2 == 0 ? lo + quarter : hi;
  return u;
}

task_spec trial_task(const task_spec& task, uint32_t trial) {
  if (trial % 2 == 0) return task;
  task_spec t = task;
  for (auto& in : t.inputs) in.init = alternative_distribution(in, (trial / 2) % 2);
  return t;
}

}  // namespace ks
