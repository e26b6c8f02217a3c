#pragma once
// The predicate language of the skill library: the small expression language in
// which derived fields, predicates, bottleneck classes, decision cases, vetoes and
// method preconditions are written (docs/skills.md, "Expressions").
//
//   dram_throughput_pct >= 60 || l2_throughput_pct >= 70
//   flops / max(dram_bytes, 1)
//   structure_class in ['streaming', 'reduction'] && !uses_vector_loads
//   has(tensor_pipe_pct) && task_dtype == 'float16'
//
// Values are numbers, strings and booleans. Evaluation is THREE-VALUED: a name that
// the evidence lacks is *unknown*, and so is anything computed from it, except that
// `unknown && false` is false and `unknown || true` is true. An unknown condition
// never fires; the evaluation says which absent names made it unknown.
//
// An expression is parsed once (policy_expr::parse, errors give the column) and
// evaluated many times; evaluation never throws and allocates little.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ks {

// One value of the language: unknown, a number, a string or a boolean.
class policy_value {
 public:
  enum class kind : unsigned char { unknown, number, string, boolean };

  policy_value() = default;  // unknown
  static policy_value unknown() { return {}; }
  static policy_value number(double v);
  static policy_value string(std::string v);
  static policy_value boolean(bool v);

  kind type() const { return kind_; }
  bool known() const { return kind_ != kind::unknown; }
  // Numbers and booleans (as 0/1) are numeric.
  bool numeric() const { return kind_ == kind::number || kind_ == kind::boolean; }
  double as_number() const;              // a numeric value; 0 otherwise
  const std::string& as_string() const;  // a string value; "" otherwise
  // Truth of a condition: numbers are true when non-zero; unknown and strings give
  // nullopt.
  std::optional<bool> truth() const;

  // "91", "0.0001", "'streaming'", "true", "unknown": shortest exact form, so the
  // same value always prints the same.
  std::string to_string() const;

  friend bool operator==(const policy_value&, const policy_value&) = default;

 private:
  kind kind_ = kind::unknown;
  double number_ = 0;
  std::string string_;
};

// Formats a double in its shortest round-trip form ("91", "1.4", "1e-05").
std::string format_number(double v);

// Static type of an expression, for load-time checks. Booleans and numbers mix
// (a 0/1 feature is a condition; a condition is 0/1 in arithmetic).
enum class value_type { number, string, boolean };
const char* to_string(value_type t);

// The names an evaluation reads. A name can be absent (unknown, and itself the
// missing name) or present with an unknown value (a derived field whose inputs were
// missing: `missing_inputs` says which base names).
class policy_environment {
 public:
  void set(const std::string& name, policy_value v, std::vector<std::string> missing = {});
  const policy_value* find(const std::string& name) const;
  // The absent base names behind an unknown name (itself when absent).
  std::vector<std::string> missing_for(const std::string& name) const;
  const std::map<std::string, policy_value>& values() const { return values_; }

 private:
  std::map<std::string, policy_value> values_;
  std::map<std::string, std::vector<std::string>> missing_;
};

// What one evaluation touched: the known values it read (for audit evidence), the
// absent names that made its result unknown, and notes (division by zero, …).
struct evaluation_record {
  std::map<std::string, policy_value> used;
  std::set<std::string> missing;
  std::set<std::string> notes;
};

// What a load-time check found: the expression's type (when it has one), names it
// references that the scope lacks (with their columns), and type errors.
struct expression_check {
  std::optional<value_type> type;
  std::vector<std::pair<std::string, int>> unknown_names;  // name, 1-based column
  std::vector<std::string> problems;                       // "column 7: ..."
};

// A parsed expression. Cheap to copy (the tree is shared and immutable).
class policy_expr {
 public:
  policy_expr() = default;

  // Parses `text`; on error the message is "column N: what was expected".
  static result<policy_expr> parse(std::string_view text);

  const std::string& text() const { return text_; }
  bool empty() const { return root_ == nullptr; }

  // Every identifier the expression references (including has()'s argument),
  // sorted, without duplicates.
  const std::vector<std::string>& identifiers() const { return identifiers_; }

  // Types the expression against `scope` (name → type of every visible name).
  expression_check check(const std::map<std::string, value_type>& scope) const;

  // Evaluates under three-valued logic. Never throws. `record` (optional) collects
  // the values read and the absent names behind an unknown result.
  policy_value evaluate(const policy_environment& env, evaluation_record* record = nullptr) const;

  // The expression in canonical form (normalised spacing and parentheses).
  std::string canonical() const;

  // Why the expression has the value it has under `env`, for audit text: the parts
  // of a conjunction that held, comparisons with the values read, e.g.
  // "dram_throughput_pct 91 ≥ 70 and streaming". `definition` (optional) gives the
  // expression behind a computed name (derived field, predicate); a condition that
  // is such a name is then explained by its definition:
  // "memory_bound (dram_throughput_pct 91 ≥ 60)".
  using definition_lookup = std::function<const policy_expr*(const std::string&)>;
  std::string explain(const policy_environment& env, const definition_lookup& definition = {}) const;

  struct node;

 private:
  std::string text_;
  std::shared_ptr<const node> root_;
  std::vector<std::string> identifiers_;
};

}  // namespace ks
