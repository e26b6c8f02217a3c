#pragma once
// Launch plans as YAML: the text form of ks::launch_plan (model/launch_plan.hpp) that
// agents write and people read. The format is documented in docs/launch-plan.md.
//
// Parsing checks the form (keys, types, expression syntax, dtype and init names) and
// reports errors as FILE:LINE:COL: FIELD: message, e.g.
//   plan.yaml:9:12: steps[0].grid[0]: unknown function 'cdiv' at column 1 in "cdiv(N, 256)" ...
// Whether the plan fits a source and a set of input shapes is the validator's job
// (plan/plan_validator.hpp).
//
// Expressions may be written unquoted even inside flow lists, `[ceil_div(N, 256)]` and
// `[x.shape[0], x.shape[1]]`, which plain YAML would split at the comma or reject:
// before YAML parsing, such plain scalars in flow collections are quoted (positions
// in error messages still refer to the original text).

#include <string>
#include <string_view>

#include "base/result.hpp"
#include "model/launch_plan.hpp"

namespace ks {

// Parses a plan from YAML text. `source_name` prefixes error positions (a path, or
// "<plan>" for text that did not come from a file).
result<launch_plan> parse_launch_plan(std::string_view yaml_text, std::string_view source_name = "<plan>");

// Reads and parses the file at `path`.
result<launch_plan> load_launch_plan(const std::string& path);

// The YAML text of `plan`, in the documented layout: constants, outputs, scratch,
// steps; flow style for buffers and argument lists; trailing grid/block dimensions of
// 1 dropped. parse_launch_plan(to_yaml(p)) == p for every plan that parse_launch_plan
// produced. The output is standard YAML: scalars that YAML would misread are quoted.
std::string to_yaml(const launch_plan& plan);

}  // namespace ks
