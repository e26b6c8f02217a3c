// Internal to policy/: the syntax tree of a policy expression, shared by its parser
// (policy_expr_parse.cpp) and what evaluates, checks, prints and explains it
// (policy_expr.cpp). policy_expr.hpp is the public face.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "policy/policy_expr.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Syntax tree.

enum class op {
  number,
  string,
  boolean,
  ident,
  neg,
  not_,
  add,
  sub,
  mul,
  div,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  and_,
  or_,
  call,
  in,
};

struct policy_expr::node {
  op kind = op::number;
  int column = 1;        // 1-based, of the node's first token (operator for binaries)
  policy_value literal;  // number/string/boolean literals
  std::string name;      // identifier or function name
  std::vector<std::shared_ptr<const node>> kids;
  std::vector<policy_value> list;  // the list of `x in [...]`
};

namespace policy_tree {

// The tree of an expression's text, or the first error as "column N: what is wrong"
// (an empty expression, an unknown character, a missing operand or parenthesis, a call
// of an unknown function or with the wrong number of arguments).
result<std::shared_ptr<const policy_expr::node>> parse(std::string_view text);

}  // namespace policy_tree
}  // namespace ks
