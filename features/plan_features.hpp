#pragma once
// The launch-plan side of the feature extractor (features/feature_extractor.hpp): the
// launch of each kernel in a resolved plan (grid, block and integer arguments, which
// the source analysis reads for trip counts and extents), how many kernel and library
// steps a plan has, the first kernel step's block and grid size, and CUDA-graph
// eligibility.
//
// What it promises: a feature the plan does not decide is left out of the values (no
// plan: no step counts, no graph eligibility; a grid that depends on shapes without a
// resolved plan: no grid_size), never set to 0.

#include <map>
#include <string>
#include <vector>

#include "features/feature_extractor.hpp"
#include "features/source_analysis.hpp"
#include "plan/kernel_signatures.hpp"

namespace ks::features {

// Launch facts per kernel name from a resolved plan: the first step launching it.
std::map<std::string, launch_info> launches_from(const resolved_plan* rp, const std::vector<kernel_signature>& sigs);

// Kernel and library steps of the plan (or else the resolved plan); -1 without either.
struct plan_step_counts {
  int kernels = -1;
  int library = -1;
};
plan_step_counts count_plan_steps(const feature_input& in);

// block_size and grid_size: of the first kernel step of the resolved plan, or of the
// plan when its expressions use plan constants only.
void set_launch_geometry(const feature_input& in, std::map<std::string, double>& values);

// cuda_graph_eligible (with a plan or a resolved plan): two or more steps, and every
// intermediate's shape known.
void set_cuda_graph_eligibility(const feature_input& in, std::map<std::string, double>& values);

}  // namespace ks::features
