#pragma once
// The size-specialised launchers of an exported module: for each of the task's shapes
// at which the plan resolves (its default shapes and each named size), a C++ function
// that runs the plan resolved at export time — buffers of fixed shapes, kernel launches
// with fixed grid, block, shared memory and scalar arguments, library steps with
// fixed numbers — so that these shapes run the numbers the plan validator checked.
//
// What it promises: the function runs the steps in the plan's order, as the reviewer's
// plan executor does; a plan that the launcher could not run as reviewed (a kernel the
// source lacks, a tensor passed to a non-pointer parameter, an intermediate produced
// twice, an unexportable library op or dtype) is an error.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "model/task.hpp"
#include "plan/kernel_signatures.hpp"
#include "plan/plan_validator.hpp"

namespace ks::export_detail {

// The plan resolved at one size.
struct size_variant {
  std::string name;                          // "default", "cpu", …
  std::vector<std::vector<int64_t>> shapes;  // inputs then parameters
  resolved_plan plan;
};

// `static std::vector<at::Tensor> FN(const std::vector<at::Tensor>& in)`: the plan of
// `v` for the task's tensors `in` (inputs, then parameters).
result<std::string> size_function(const task_spec& task, const size_variant& v,
                                  const std::vector<kernel_signature>& kernels, const std::string& fn);

}  // namespace ks::export_detail
