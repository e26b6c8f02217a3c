#pragma once
// A skill method as moves in a candidate's search space (issue 48, point 1): the
// method's `rules_coder` entry (skills/*.yaml: param, op, values) read against the
// legal values its template declared at the task's shapes (coder/search_space.hpp).
//
// - `set` / `choose`: the listed values, in order; where every listed number is above
//   the current value (the method raises the parameter), then the other legal values
//   above it, nearest first;
// - `multiply`: the listed factors' products first, then every other legal value in
//   the same direction (up for a factor over 1, else down), nearest first;
// - `toggle`: the other value.
// Only legal values, never the current one, never one the recipe's `excluded` list
// holds after a failure. The rules coder tries them in order and takes the first that
// changes a kernel (coder/rules_coder.hpp), so a line goes on while its template has
// legal values left in the method's direction, rather than ending when the skill's
// listed values run out.
//
// With explore off, a method's moves are its listed values alone, the first that
// differs from the current value (how the rules coder applied methods before the
// search space: kept so that a test can measure what the space adds).

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "coder/search_space.hpp"
#include "policy/skill_library.hpp"

namespace ks {

struct param_change {
  std::string param;
  std::string value;
  bool operator==(const param_change& o) const { return param == o.param && value == o.value; }
};

// A method's move on a candidate: the parameter change it makes there, and what the
// skill expects of it (method_def::expected_effect: metric → up | down | same).
struct space_move {
  std::string method;
  std::string param;
  std::string from;
  std::string to;
  std::map<std::string, std::string> expected_effect;
};

// The changes `rule` (of method `method`) asks for on a candidate with `recipe`, in the
// order to try; an error says why there is none ("method M does not apply to template
// T: why"). `source` is the candidate's (what its kernels call).
result<std::vector<param_change>> rule_changes(const std::string& method, const coder_rule& rule,
                                               const std::map<std::string, std::string>& recipe,
                                               const search_space& space, const std::set<std::string>& excluded,
                                               const std::string& source, bool explore = true);

}  // namespace ks
