#pragma once
// Shape expressions: the small arithmetic language of launch plans, in which grid and
// block sizes, buffer shapes, shared memory sizes and scalar kernel arguments are
// written as functions of the input shapes (docs/launch-plan.md, "Expressions").
//
//   ceil_div(x.numel, BLOCK)      x.shape[-1] * 4      max(N, 1) / 2.0
//
// Arithmetic is integer-first: values are int64 until a float literal or a float
// function takes part, then double. Integer `/` and `%` round toward negative infinity
// as Python's `//` and `%` do, so a plan reads like the PyTorch reference it replaces.
// Integer overflow is an error, never a wrap-around.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ks {

// The value of an expression: an int64, or a double once a float took part.
struct expr_value {
  bool is_float = false;
  int64_t i = 0;  // meaningful when !is_float
  double f = 0;   // meaningful when is_float

  static expr_value integer(int64_t v) { return {false, v, 0.0}; }
  static expr_value real(double v) { return {true, 0, v}; }
  double as_double() const { return is_float ? f : static_cast<double>(i); }
  // "256", "0.5": integers print without a decimal point, doubles with the shortest
  // text that reads back to the same value.
  std::string to_string() const;
  friend bool operator==(const expr_value&, const expr_value&) = default;
};

// What an expression may refer to: plan constants (bare names) and tensors, whose
// shapes are seen through T.shape[i], T.numel and T.ndim.
struct expr_env {
  std::map<std::string, expr_value> constants;
  std::map<std::string, std::vector<int64_t>> tensors;  // name → shape
  // Tensors that exist but whose shape is known only when the plan runs (the result
  // of a library op without shape inference); naming their shape is an error that
  // says so instead of "unknown tensor".
  std::map<std::string, std::string> unknown_shape_tensors;  // name → why
};

// A parsed expression. Parse once, evaluate against many environments. Copies share
// the syntax tree, which is immutable.
class shape_expr {
 public:
  // Parses `text`. Errors name the offending token and its 1-based column:
  //   unexpected ')' at column 5 in "N + )"
  static result<shape_expr> parse(std::string_view text);

  // Evaluates against `env`. Errors: unknown name or tensor, shape index out of range,
  // division by zero, integer overflow, a non-finite float result.
  result<expr_value> eval(const expr_env& env) const;

  // The source text, as given to parse().
  const std::string& text() const { return text_; }

  // Names of the plan constants the expression reads (bare names), sorted, unique.
  std::vector<std::string> constant_names() const;
  // Names of the tensors whose shapes it reads (T in T.numel), sorted, unique.
  std::vector<std::string> tensor_names() const;

  struct node;  // the syntax tree; defined in shape_expr.cpp

 private:
  shape_expr(std::string text, std::shared_ptr<const node> root) : text_(std::move(text)), root_(std::move(root)) {}
  std::string text_;
  std::shared_ptr<const node> root_;
};

// Parses and evaluates in one call, for expressions used once.
result<expr_value> eval_expr(std::string_view text, const expr_env& env);

// True when `name` can be a constant's name: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view name);

}  // namespace ks
