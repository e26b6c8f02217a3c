#pragma once
// The evidence vocabulary in code: every name a skill-library expression may read
// (docs/metrics.md is the contract; tests check that the two agree).
//
// The decision policy evaluates expressions over one flat environment of names:
// profile metrics (profile_metrics.values, plus kernel_launches and duration_us),
// code features (code_features.values), the structure class and the task fields.
// The loader refuses an expression that names anything else, so a typo in a skill
// file is caught when the library loads, not silently read as "unknown" at run time.

#include <string>
#include <vector>

namespace ks {

// What an evidence name is: where its value comes from.
enum class evidence_kind { metric, feature, structure, task };

// The value type a name has in expressions.
enum class evidence_type { number, string };

struct evidence_name {
  std::string name;
  evidence_kind kind;
  evidence_type type;
  std::string meaning;  // one line, for docs and prompts
};

// Every known name, metrics first, then features, structure_class, task fields.
const std::vector<evidence_name>& evidence_names();

// The entry for `name`, or nullptr.
const evidence_name* find_evidence_name(const std::string& name);

// The names of one kind, in table order.
std::vector<std::string> evidence_names_of(evidence_kind kind);

// "metric", "feature", "structure", "task".
const char* to_string(evidence_kind kind);

// The structure classes the feature extractor assigns (structure_class values).
const std::vector<std::string>& structure_classes();

}  // namespace ks
