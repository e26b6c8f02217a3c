#pragma once
// The deterministic feature extractor: static code features of a candidate, from its
// CUDA source, NVRTC's PTX for it, the compiler's resource report and its launch plan.
// No LLM is involved; the same input always yields the same features.
//
// The feature names and the structure classes are those of docs/metrics.md ("Code
// features"); docs/features.md says how each one is detected and where the heuristics
// are blind. Features that cannot be decided from what is given (registers without a
// resource report, block_size without a plan, ...) are left out of `values`, which
// the decision policy reads as "unknown", never as 0.

#include <string>
#include <vector>

#include "model/decision.hpp"
#include "model/launch_plan.hpp"
#include "model/review.hpp"
#include "plan/plan_validator.hpp"
#include "policy/evidence_names.hpp"

namespace ks {

struct feature_input {
  std::string source;                       // the candidate's CUDA source
  std::string ptx;                          // NVRTC's PTX for it (may be empty: then PTX-derived
                                            // features fall back to source analysis)
  std::vector<kernel_resources> resources;  // registers/spills per kernel (may be empty)
  const launch_plan* plan = nullptr;        // optional; with shapes → resolved numbers
  const resolved_plan* resolved = nullptr;  // optional: concrete grid/block of each step
  std::string dtype = "float32";            // task's main dtype (tensor-core eligibility)
};

// Deterministic; never throws. candidate_id is left empty for the caller to fill.
code_features extract_features(const feature_input& input);

// The names extract_features may set, in docs/metrics.md's order.
const std::vector<std::string>& code_feature_names();

// structure_classes() (the classes structure_class takes) is declared with the
// rest of the evidence vocabulary in policy/evidence_names.hpp.

// The size assumed for a problem dimension when no resolved plan gives it (GEMM
// operand reuse is proportional to it; see docs/features.md, reuse_factor).
inline constexpr double nominal_problem_extent = 1024.0;

}  // namespace ks
