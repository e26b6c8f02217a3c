#include "export/embedded_runtime.hpp"

#include <string>

#include "export/pytorch_export.hpp"

namespace ks::export_detail {

// plan/expr_runtime.hpp (the expression language's arithmetic, as plan/shape_expr.cpp
// computes it), then the ks_ functions over it that the translated expressions call.
const std::string& expression_runtime() {
  static const std::string text =
      std::string(embedded::expr_runtime_hpp()) + std::string(embedded::launcher_expr_inc());
  return text;
}

// gpu/dispatch_runtime.hpp (the reviewer's way of calling any ATen op by its schema, so
// the module runs the op as the review did), then the module's side of it.
const std::string& dispatch_runtime() {
  static const std::string text =
      std::string(embedded::dispatch_runtime_hpp()) + std::string(embedded::launcher_dispatch_inc());
  return text;
}

// gpu/result_adoption.hpp (whether a library step's result may become its declared
// buffer, as the reviewer decides it).
const std::string& library_results_runtime() {
  static const std::string text(embedded::result_adoption_hpp());
  return text;
}

// gpu/matmul_precision.hpp (a split-precision product's call with TF32 allowed, as the
// reviewer runs it).
const std::string& matmul_precision_runtime() {
  static const std::string text(embedded::matmul_precision_hpp());
  return text;
}

}  // namespace ks::export_detail
