#pragma once
// review_result for people: the text `kernelskill-gpu --review` prints, and JSON for
// scripts and benchmarks. LibTorch-free.

#include <string>

#include "model/review.hpp"

namespace ks {

// A few lines: status and message, trials, errors, times and speedup, flags,
// resources, diagnostics (compile errors with line:column), and the compile log when
// the compile failed.
std::string format_review(const review_result& r);

// The result as a JSON object (every field of review_result, times in ms).
std::string review_to_json(const review_result& r, int indent = 2);

}  // namespace ks
