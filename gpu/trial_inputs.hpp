#pragma once
// Which inputs each trial of a review draws (docs/reviewer.md, "Two distributions"):
// torch-free, so the rule is tested and read without a GPU.

#include <cstdint>
#include <string>

#include "model/task.hpp"

namespace ks {

// The task whose input specs make the inputs of trial `trial`: even trials use the
// task's own distributions; odd trials replace each floating-point input's normal or
// uniform distribution with alternative_distribution(spec, (trial / 2) % 2).
// Parameters, integer and bool inputs, and structural inits (constant, zeros, ones,
// arange) never change.
task_spec trial_task(const task_spec& task, uint32_t trial);

// The second distribution of a floating-point input (variant 0 in trials 1, 5, 9, …;
// variant 1 in trials 3, 7, …):
//   normal(m, s)         -> variant 0: normal(m, 4s)    (4x the range: overflow, tails)
//                           variant 1: uniform(m - 3s, m + 3s)   (flat, bounded)
//   uniform(lo, hi)      -> variant 0: uniform(lo, lo + (hi - lo) / 4)
//                           variant 1: uniform(hi - (hi - lo) / 4, hi)
//   kaiming_uniform (±b) -> as uniform(-b, b)
// A uniform input stays inside its support (inputs that must be positive stay
// positive) but crowds at one end of it; other inits are returned unchanged.
distribution_spec alternative_distribution(const tensor_spec& spec, uint32_t variant);

// "normal(0, 1)", "uniform(-3, 3)", "randint(0, 10)", …
std::string describe_distribution(const distribution_spec& d);

}  // namespace ks
