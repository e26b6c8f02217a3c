#pragma once
// The text pieces every template writes with: expressions (products of shape
// expressions, float literals, parentheses), reads of a kernel parameter found in a
// chain's code, and a kernel's parameter list with the plan arguments
// bound to it.
//
// What it promises:
// - every function is pure text: the same input gives the same characters, so what
//   the templates write stays byte for byte what it was;
// - kernel_params hands out a parameter per tensor or expression once, named by the
//   order of first use (in0, out1, n2, f3 ...), its declaration and its plan argument
//   in that same order.

#include <map>
#include <string>
#include <vector>

#include "base/strings.hpp"
#include "coder/rules/plan/expr_text.hpp"
#include "model/launch_plan.hpp"

namespace ks::rules {

// is_simple, paren, product, ident, base_kind and join: plan/expr_text.hpp.

// Whether `code` reads tensor parameter `p` at index `i` (a whole-word p[i], or with a
// cache hint: __ldcs(p + i), __ldg(p + (i))). A search only: a chain that is to read an
// element from elsewhere is written so (chain_reads::held_reads), not rewritten.
bool reads_at(const std::string& code, const std::string& p, const std::string& i);

// A float literal (NaN and the infinities by their bits).
std::string flit(double v);
// The name of stage i's kernel: ks<i>_<what>.
std::string kernel_name(size_t i, const std::string& what);

// One kernel's parameters and the plan arguments bound to them.
struct kernel_params {
  std::vector<std::string> decls;
  std::vector<plan_arg> args;
  std::map<std::string, std::string> tensor_param;  // plan tensor name → parameter
  std::map<std::string, std::string> int_param;     // expression → parameter

  // `ctype`: the element type of the pointer (float; double for a float64 scratch;
  // bool for a mask, whose parameter is named m<k> rather than in<k>).
  std::string tensor_in(const std::string& tensor, const std::string& ctype = "float");
  std::string tensor_out(const std::string& tensor, const std::string& ctype = "float");
  std::string int64(const std::string& expr);
  std::string float32(const std::string& expr);
};

}  // namespace ks::rules
