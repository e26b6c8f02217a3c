#pragma once
// Experience: what each optimisation method achieved, in which situation, across
// tasks. The planner reads the summary (method_stats) to prefer methods that have
// worked for the same bottleneck before; records are kept across skill-library
// upgrades and carry the library version they were made under, so that a reader can
// weigh or ignore evidence gathered under older method definitions.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/fields.hpp"

namespace ks {

// One application of a method to a kernel.
struct experience_record {
  std::string method;            // skill-library method name, e.g. "vectorize_loads"
  std::string bottleneck_class;  // the planner's diagnosis, e.g. "memory_bandwidth"
  std::string structure_class;   // the kernel's structure, e.g. "streaming"
  std::string task;
  uint32_t skill_library_version = 0;
  double speedup_before = 0;                   // over the reference, before the method
  double speedup_after = 0;                    // after it (meaningful when correct)
  bool correct = false;                        // the result compiled and passed the check
  std::map<std::string, double> metric_delta;  // profile metric → after − before
  int64_t unix_ms = 0;
  // The template of the kernel the method was applied to (a rules-coder recipe's
  // `template`); "" for another coder's kernel, or a record made before templates
  // were recorded (such a record counts for every template).
  std::string template_name;
  friend bool operator==(const experience_record&, const experience_record&) = default;
};
template <class F>
auto visit_fields(experience_record& x, F&& f) {
  return f("experience_record", KS_FIELD(method), KS_FIELD(bottleneck_class), KS_FIELD(structure_class), KS_FIELD(task),
           KS_FIELD(skill_library_version), KS_FIELD(speedup_before), KS_FIELD(speedup_after), KS_FIELD(correct),
           KS_FIELD(metric_delta), KS_FIELD(unix_ms), KS_FIELD(template_name));
}

// What one method achieved for one bottleneck class.
struct method_stats {
  std::string method;
  std::string bottleneck_class;
  uint32_t applied = 0;   // every record, correct or not
  uint32_t correct = 0;   // records whose result was correct
  uint32_t improved = 0;  // correct and faster than before
  // Geometric mean of speedup_after / speedup_before over the correct applications
  // with both speedups positive; 0 when there is none. A geometric mean because
  // gains compose multiplicatively and one 10x outlier should not swamp the rest.
  double mean_gain = 0;
  double best_gain = 0;  // the largest such ratio; 0 when there is none
  // What applying it gave a line, geometric mean over every application: the ratio
  // where the result was correct and faster, 1 (nothing) where it was slower or
  // failed — a line keeps the faster of its kernel and the attempt, so a loss costs
  // it a review, not speed. The planner weighs it against a move's prior gain
  // (docs/skills.md, "Experience"). 0 when nothing was applied.
  double realized_gain = 0;
  friend bool operator==(const method_stats&, const method_stats&) = default;
};
template <class F>
auto visit_fields(method_stats& x, F&& f) {
  return f("method_stats", KS_FIELD(method), KS_FIELD(bottleneck_class), KS_FIELD(applied), KS_FIELD(correct),
           KS_FIELD(improved), KS_FIELD(mean_gain), KS_FIELD(best_gain), KS_FIELD(realized_gain));
}

// What applying a method gave its line (see method_stats::realized_gain).
double realized_gain(const experience_record& r);

// Groups `records` by (method, bottleneck_class), keeping only `bottleneck` when it
// is not empty, only the records of `template_name` (and those without a template)
// when it is given, and leaving out the records of task `other_than` when it is not
// empty (the planner reads what other tasks learned; its own task's attempts are the
// short-term memory's). Sorted by method, then bottleneck class.
std::vector<method_stats> summarize_experience(const std::vector<experience_record>& records,
                                               const std::string& bottleneck = "",
                                               const std::optional<std::string>& template_name = std::nullopt,
                                               const std::string& other_than = "");

}  // namespace ks
