#pragma once
// The ATen ops a plan's library steps may run (docs/launch-plan.md, "Library ops"):
// - a table from the op's name to a call of the at:: function with the step's
//   arguments and attributes parsed: exactly the ops the plan validator infers shapes
//   for;
// - any other ATen op when the step carries its schema (attrs.schema, "Dispatcher
//   steps"): it is called through ATen's dispatcher, that overload exactly, with its
//   tensors from the step's args and every other argument parsed from the attribute
//   of the same name by the schema's type (or its default). This is how the rules
//   coder runs the ops its templates do not cover.
// A step naming an op neither covers is refused by the reviewer with a plan_error.
// Works on any device: tests run it on CPU tensors.
//
// This header includes ATen's Tensor; keep it out of torch-free code.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "base/result.hpp"

namespace ks {

// One positional argument of a library step: a tensor, or a number (an int or a
// float, as the plan typed it).
struct library_arg {
  at::Tensor tensor;  // defined for a tensor argument
  bool is_float = false;
  int64_t int_value = 0;
  double float_value = 0;
  bool is_tensor() const { return tensor.defined(); }
  static library_arg of(at::Tensor t) {
    library_arg a;
    a.tensor = std::move(t);
    return a;
  }
  static library_arg of_int(int64_t v) {
    library_arg a;
    a.int_value = v;
    return a;
  }
  static library_arg of_float(double v) {
    library_arg a;
    a.is_float = true;
    a.float_value = v;
    return a;
  }
};

// "aten::matmul", … in a stable order.
const std::vector<std::string>& library_op_names();

// Whether `op` (with or without an overload suffix, "aten::add.Tensor") is in the table.
bool is_library_op(std::string_view op);

// Whether a step of `op` with `attrs` can run: in the table, or (attrs.schema) an op
// ATen's dispatcher knows. The error says why not.
status check_library_op(std::string_view op, const std::map<std::string, std::string>& attrs);

// Runs `op` on `args` with `attrs` (strings, as plans write them: dim "-1", alpha
// "0.5", stride "[2, 2]", padding "same", approximate "tanh", rounding_mode "floor").
// Errors: an op not in the table, a wrong number or kind of arguments, an attribute
// that does not parse, or LibTorch's own message (without its C++ backtrace).
// Asynchronous on CUDA tensors, as ATen is: the caller synchronises. `plan_device` is
// where the plan runs: a step without tensor arguments (aten::randn) makes its result
// there (gpu/dispatch_runtime.hpp); the CPU by default, as the tests' plans run.
result<at::Tensor> run_library_op(std::string_view op, const std::vector<library_arg>& args,
                                  const std::map<std::string, std::string>& attrs,
                                  const c10::Device& plan_device = c10::Device(c10::kCPU));

// The same, with every tensor the op returns (aten::sort: values and indices).
result<std::vector<at::Tensor>> run_library_op_outputs(std::string_view op, const std::vector<library_arg>& args,
                                                       const std::map<std::string, std::string>& attrs,
                                                       const c10::Device& plan_device = c10::Device(c10::kCPU));

// A library step prepared once (per plan) and run many times with arguments of the
// same kinds (the same count, tensors and numbers in the same places), as a plan's
// step always has: the table's entry found and the arguments counted; or, for a
// dispatcher step, the operator found and its stack built with every attribute parsed
// (gpu/dispatch_runtime.hpp), so that a run only fills in the tensors. A table op
// still reads its few attributes per run (its at:: call is the fast path already).
// run_library_op_outputs is prepare_library_op then run_prepared_library_op, so the
// two compute the same and fail with the same words. Copies share the preparation.
struct prepared_library_op_state;
class prepared_library_op {
 public:
  const std::string& op() const;

 private:
  friend result<prepared_library_op> prepare_library_op(std::string_view, const std::vector<library_arg>&,
                                                        const std::map<std::string, std::string>&);
  friend result<std::vector<at::Tensor>> run_prepared_library_op(const prepared_library_op&,
                                                                 const std::vector<library_arg>&, const c10::Device&);
  std::shared_ptr<const prepared_library_op_state> state_;
};

// Prepares a step of `op` with `attrs` for arguments of the kinds of `args` (their
// values are not read). Errors: those of run_library_op_outputs that do not depend on
// the arguments' values, worded as it words them.
result<prepared_library_op> prepare_library_op(std::string_view op, const std::vector<library_arg>& args,
                                               const std::map<std::string, std::string>& attrs);

// Runs a prepared step on `args`: every tensor the op returns. An error when `args` are
// not of the kinds it was prepared for, or the op's own (as run_library_op_outputs).
result<std::vector<at::Tensor>> run_prepared_library_op(const prepared_library_op& step,
                                                        const std::vector<library_arg>& args,
                                                        const c10::Device& plan_device = c10::Device(c10::kCPU));

}  // namespace ks
