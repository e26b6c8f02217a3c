#pragma once
// Candidates: CUDA device code for NVRTC plus a declarative launch plan (no host code
// runs). model/candidate_id.hpp gives a candidate its content address.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/fields.hpp"
#include "model/launch_plan.hpp"

namespace ks {

struct candidate {
  std::string id;                            // content hash of source + options + plan
  std::string task;                          // task name
  std::string source;                        // CUDA C++ device code
  std::vector<std::string> compile_options;  // extra NVRTC options (e.g. --use_fast_math)
  launch_plan plan;
  std::string origin;     // "seed:TEMPLATE", "optimize:METHOD", "repair", …
  std::string parent_id;  // candidate this one was derived from, or empty
  uint32_t round = 0;
  // How a template backend built it (the rules coder: template name and parameters),
  // so that a later method can be applied as a parameter change; empty for code an
  // LLM wrote. Not part of the id: the source and plan already say what runs.
  std::map<std::string, std::string> recipe;
  friend bool operator==(const candidate&, const candidate&) = default;
};
template <class F>
auto visit_fields(candidate& x, F&& f) {
  return f("candidate", KS_FIELD(id), KS_FIELD(task), KS_FIELD(source), KS_FIELD(compile_options), KS_FIELD(plan),
           KS_FIELD(origin), KS_FIELD(parent_id), KS_FIELD(round), KS_FIELD(recipe));
}

}  // namespace ks
