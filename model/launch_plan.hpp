#pragma once
// Launch plans: how a candidate's kernels (and library steps) are run over the task's
// tensors. The plan format is documented in docs/launch-plan.md and parsed by plan/.

#include <map>
#include <string>
#include <vector>

#include "model/fields.hpp"

namespace ks {

//   kind "tensor": value names an input, parameter, scratch or output tensor;
//   kind "int"/"float": value is an expression over shapes and plan constants,
//   passed as `type` (int32, int64, float32, float64).
struct plan_arg {
  std::string kind;
  std::string value;
  std::string type;
  friend bool operator==(const plan_arg&, const plan_arg&) = default;
};
template <class F>
auto visit_fields(plan_arg& x, F&& f) {
  return f("plan_arg", KS_FIELD(kind), KS_FIELD(value), KS_FIELD(type));
}

// One step of a plan. kind "kernel": launch `name` from the candidate's source with
// grid/block (three expressions each) and dynamic shared memory; kind "library":
// call the ATen op `name` (e.g. aten::matmul) on `args`, writing `outputs`.
struct plan_step {
  std::string kind;
  std::string name;
  std::vector<std::string> grid;
  std::vector<std::string> block;
  std::string shared_mem = "0";
  std::vector<plan_arg> args;
  std::vector<std::string> outputs;
  std::map<std::string, std::string> attrs;
  friend bool operator==(const plan_step&, const plan_step&) = default;
};
template <class F>
auto visit_fields(plan_step& x, F&& f) {
  return f("plan_step", KS_FIELD(kind), KS_FIELD(name), KS_FIELD(grid), KS_FIELD(block), KS_FIELD(shared_mem),
           KS_FIELD(args), KS_FIELD(outputs), KS_FIELD(attrs));
}

// A tensor the plan allocates: scratch space or an output. shape holds expressions.
// init: "none" (uninitialised; outputs are poisoned by the verifier), "zeros".
struct buffer_spec {
  std::string name;
  std::vector<std::string> shape;
  std::string dtype = "float32";
  std::string init = "none";
  friend bool operator==(const buffer_spec&, const buffer_spec&) = default;
};
template <class F>
auto visit_fields(buffer_spec& x, F&& f) {
  return f("buffer_spec", KS_FIELD(name), KS_FIELD(shape), KS_FIELD(dtype), KS_FIELD(init));
}

struct launch_plan {
  std::map<std::string, std::string> constants;  // name → expression
  std::vector<buffer_spec> scratch;
  std::vector<buffer_spec> outputs;  // in the order the reference returns them
  std::vector<plan_step> steps;
  friend bool operator==(const launch_plan&, const launch_plan&) = default;
};
template <class F>
auto visit_fields(launch_plan& x, F&& f) {
  return f("launch_plan", KS_FIELD(constants), KS_FIELD(scratch), KS_FIELD(outputs), KS_FIELD(steps));
}

}  // namespace ks
