#pragma once
// A candidate's search space: the lowering parameters its templates read and the
// values each may legally take at the task's shapes (issue 48, point 1). Every
// template declares its own on the template table (coder/rules/templates/template_table.hpp,
// computed by coder/rules/templates/search_space.cpp from the stage's shapes at the target
// size); lower_graph gathers them into lowered_kernel_set::space, and the rules coder
// writes it into the candidate's recipe (`space`) and derives each skill method's
// move from it (coder/space_moves.hpp).
//
// What it promises:
// - a parameter is listed only where some kernel of the candidate reads it; its values
//   are in the parameter's own order (numbers ascending, named values in their name
//   table's order: coder/lowering_params.hpp), each once;
// - text() and parse_search_space() round-trip: "block_size=32|64;cache_hint=none|readonly".

#include <map>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

struct search_space {
  // param → its legal values, in the parameter's order.
  std::map<std::string, std::vector<std::string>> legal;

  // Adds `values` to `param`'s legal values (kept in order, without repeats); none
  // adds no parameter.
  void allow(const std::string& param, const std::vector<std::string>& values);
  // Adds every legal value of `other`.
  void merge(const search_space& other);
  bool has(const std::string& param) const { return legal.count(param) > 0; }
  bool allows(const std::string& param, const std::string& value) const;
  // The legal values of `param` ({} when it is not a parameter of this space).
  const std::vector<std::string>& values(const std::string& param) const;
  bool empty() const { return legal.empty(); }
  std::string text() const;
};

// The space text() wrote; an error names the malformed entry.
result<search_space> parse_search_space(const std::string& text);

// Whether `param` takes numbers (ordered by value) rather than names.
bool numeric_param(const std::string& param);

}  // namespace ks
