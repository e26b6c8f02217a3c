#pragma once
// Analysis and planning: a kernel's static features, the planner's decision (ranked
// and vetoed methods, the chosen one) and the diagnoser's repair plan.

#include <map>
#include <string>
#include <vector>

#include "model/fields.hpp"

namespace ks {

// Static features of a kernel (docs/features.md): numeric or 0/1 values by name,
// plus the structure class (streaming, reuse, irregular, reduction, multi_kernel).
struct code_features {
  std::string candidate_id;
  std::string structure_class;
  std::map<std::string, double> values;
  friend bool operator==(const code_features&, const code_features&) = default;
};
template <class F>
auto visit_fields(code_features& x, F&& f) {
  return f("code_features", KS_FIELD(candidate_id), KS_FIELD(structure_class), KS_FIELD(values));
}

// A method the decision policy allows, with the rules that fired and the evidence.
struct method_choice {
  std::string method;
  double score = 0;
  std::vector<std::string> fired_rules;
  std::map<std::string, double> evidence;
  friend bool operator==(const method_choice&, const method_choice&) = default;
};
template <class F>
auto visit_fields(method_choice& x, F&& f) {
  return f("method_choice", KS_FIELD(method), KS_FIELD(score), KS_FIELD(fired_rules), KS_FIELD(evidence));
}

struct method_veto {
  std::string method;
  std::string reason;
  friend bool operator==(const method_veto&, const method_veto&) = default;
};
template <class F>
auto visit_fields(method_veto& x, F&& f) {
  return f("method_veto", KS_FIELD(method), KS_FIELD(reason));
}

// The planner's decision for one round: the bottleneck it diagnosed, the ranked
// allowed methods, the vetoed ones, and the one chosen.
struct optimization_plan {
  std::string candidate_id;
  std::string bottleneck_class;
  std::vector<method_choice> ranked;
  std::vector<method_veto> vetoed;
  std::string chosen;
  std::string rationale;
  friend bool operator==(const optimization_plan&, const optimization_plan&) = default;
};
template <class F>
auto visit_fields(optimization_plan& x, F&& f) {
  return f("optimization_plan", KS_FIELD(candidate_id), KS_FIELD(bottleneck_class), KS_FIELD(ranked), KS_FIELD(vetoed),
           KS_FIELD(chosen), KS_FIELD(rationale));
}

// The diagnoser's reading of a failure and what the repairer should do about it.
struct repair_plan {
  std::string candidate_id;
  std::string diagnosis;
  std::vector<std::string> actions;
  friend bool operator==(const repair_plan&, const repair_plan&) = default;
};
template <class F>
auto visit_fields(repair_plan& x, F&& f) {
  return f("repair_plan", KS_FIELD(candidate_id), KS_FIELD(diagnosis), KS_FIELD(actions));
}

}  // namespace ks
