#pragma once
// The skill library: KernelSkill's long-term expert knowledge, read from
// skills/*.yaml (docs/skills.md describes the format).
//
// A library holds derived fields and named predicates over the evidence (profile
// metrics, code features, structure class, task fields: policy/evidence_names.hpp),
// bottleneck classes, optimisation methods with their rationale and examples, a
// decision table (bottleneck class × kernel structure → allowed and forbidden
// methods), global vetoes and the guardrails that read a task's history. The
// decision policy (policy/decision_policy.hpp) applies it.
//
// load_skill_library() promises: a library it returns is complete and consistent —
// every reference resolves, every expression parses and names only known evidence,
// derived fields or predicates, every id is unique — so the policy never meets a
// dangling name. Otherwise it reports every problem, one per line, each
// `FILE:LINE:COL: entry.field: what is wrong (did you mean …?)`.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "policy/policy_expr.hpp"

namespace ks {

// Where an entry was written: "skills/methods.yaml:120:5".
struct source_location {
  std::string file;
  int line = 0;
  int column = 0;
  std::string to_string() const;
};

// A named computed value (a number or condition), evaluated in library order; may
// use evidence and earlier derived fields.
struct derived_field {
  std::string id;
  policy_expr expr;
  std::string description;
  source_location where;
};

// A named condition, referenced by id from other expressions; may use evidence,
// derived fields and other predicates (no cycles).
struct predicate_def {
  std::string id;
  policy_expr expr;
  std::string description;
  source_location where;
};

// A bottleneck class. Every class whose `when` holds is reported; the one with the
// highest priority is the primary class that the decision table is keyed on.
struct bottleneck_def {
  std::string id;
  int priority = 0;
  policy_expr when;
  std::string description;
  std::vector<std::string> evidence;  // names worth showing when the class holds
  source_location where;
};

// How the rules coder applies a method: change parameter `param` by `op`
// (set | multiply | toggle | choose) using `values` (scalars as written).
struct coder_rule {
  std::string param;
  std::string op;
  std::vector<std::string> values;
};

// An optimisation method with what a coder (LLM or rules) needs to apply it.
struct method_def {
  std::string id;
  std::string name;
  std::string category;  // memory | compute | latency | occupancy | parallelism |
                         // divergence | launch | fusion | precision | algorithm
  std::string rationale;
  std::vector<std::string> preconditions;              // prose
  std::optional<policy_expr> requirement;              // YAML `requires`
  std::map<std::string, std::string> expected_effect;  // metric → up | down | same
  std::vector<std::string> forbidden_patterns;
  std::string example;
  std::vector<coder_rule> rules_coder;
  std::vector<std::string> sources;
  source_location where;
};

struct allowed_method {
  std::string method;
  double gain = 1.0;  // expected speedup factor
  std::string why;
};

struct forbidden_method {
  std::string method;
  std::string why;
};

// Evidence for which a decision case must fire (checked by the library's tests).
struct case_example {
  std::string structure_class;
  std::map<std::string, double> metrics;
  std::map<std::string, double> features;
  std::optional<double> task_atol;
  std::optional<double> task_rtol;
  std::string task_dtype;  // "" = not given
  std::optional<uint32_t> round;
};

// One row of the decision table.
struct decision_case {
  std::string id;
  std::string description;
  std::string bottleneck;              // a bottleneck id, or "any"
  std::vector<std::string> structure;  // structure classes; empty = any
  std::optional<policy_expr> when;
  std::vector<allowed_method> allow;
  std::vector<forbidden_method> forbid;
  case_example example;
  source_location where;
};

// A veto applied after the table: while `when` holds, `methods` are not allowed.
struct global_veto {
  std::string id;
  std::vector<std::string> methods;
  policy_expr when;
  std::string why;
  source_location where;
};

// Limits that read the task's history (docs/skills.md, "Guardrails").
struct guardrail_settings {
  int max_failures_per_method = 1;
  // The measurement's noise: an attempt below its parent × min_gain did not help, and
  // a move whose expected gain is not above it is not offered (docs/skills.md, "The
  // plan across rounds").
  double min_gain = 1.02;
  int oscillation_window = 4;
  // The expected gain of a move the decision table does not name (a legal move of the
  // candidate's coder beyond the fired cases), before experience. No higher than the
  // table's gains, so that a priori the table's moves come first (a tie goes to the
  // table); above min_gain, or such moves are never offered.
  double exploration_gain = 1.03;
  // How many applications the prior gain (the table's, or exploration_gain) weighs
  // against the measured ones when experience adjusts a move's expected gain.
  double prior_weight = 1;
};

struct skill_library {
  std::string name;
  int version = 0;
  std::string description;
  std::vector<std::string> files;  // the files it was read from, in order
  std::vector<derived_field> derived;
  std::vector<predicate_def> predicates;    // in evaluation order (dependencies first)
  std::vector<bottleneck_def> bottlenecks;  // highest priority first
  std::vector<method_def> methods;          // in file order
  std::vector<decision_case> decisions;     // in file order
  std::vector<global_veto> vetoes;
  guardrail_settings guardrails;

  const method_def* find_method(const std::string& id) const;
  const bottleneck_def* find_bottleneck(const std::string& id) const;
  const decision_case* find_case(const std::string& id) const;
};

// Loads every *.yaml (and *.yml) file of `dir`, sorted by name, as one library.
result<skill_library> load_skill_library(const std::filesystem::path& dir);

// The allowed values of the enumerated fields.
const std::vector<std::string>& method_categories();
const std::vector<std::string>& effect_directions();  // up, down, same
const std::vector<std::string>& coder_ops();          // set, multiply, toggle, choose

// The library's canonical text: sorted-key JSON of everything that affects
// decisions and prompts (not file positions).
std::string canonical_text(const skill_library& lib);

// A stable hash of canonical_text(): its SHA-256, 64 lowercase hex digits. File
// names, positions, comments and formatting do not change it; any content does.
std::string library_hash(const skill_library& lib);

// The library as store documents, key → JSON: "library" (name, version, hash,
// guardrails), "derived/ID", "predicate/ID", "bottleneck/ID", "method/ID",
// "decision/ID", "veto/ID". Sorted by key.
std::vector<std::pair<std::string, std::string>> to_store_docs(const skill_library& lib);

}  // namespace ks
