#pragma once
// Plan validation: binds a launch plan to a candidate's source and to concrete input
// shapes, and produces the numbers an executor needs (every buffer's shape, every
// launch's grid, block, shared memory and argument values), or the first thing that
// is wrong, in a message that names the step and the field:
//
//   step 1 (library aten::matmul): outputs[0] 'out': shape [128, 64] does not match
//   the op's result [128, 32]
//
// What is checked, and the rules it applies (read-before-write, which library ops have
// shape inference), is listed in docs/launch-plan.md, "Validation".

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "model/launch_plan.hpp"
#include "model/task.hpp"
#include "plan/dtypes.hpp"
#include "plan/kernel_signatures.hpp"
#include "plan/shape_expr.hpp"

namespace ks {

// What the device allows a launch. Defaults are those of sm_90 (H100, H200); the
// shared memory limit is the opt-in maximum of dynamic shared memory per block, which
// an executor reaches only after raising CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
struct device_limits {
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block_dims{1024, 1024, 64};
  std::array<int64_t, 3> max_grid_dims{2147483647, 65535, 65535};
  int64_t max_shared_mem_bytes = 232448;
};

// A tensor that exists before the plan runs, or one the reference returns.
struct tensor_info {
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  friend bool operator==(const tensor_info&, const tensor_info&) = default;
};

// Everything a plan is checked against.
struct plan_context {
  // The reference's inputs and parameters, by name: what plans read.
  std::map<std::string, tensor_info> inputs;
  // The __global__ functions of the candidate's source (extract_kernel_signatures).
  std::vector<kernel_signature> kernels;
  device_limits limits;
  // How many tensors the reference returns, when known.
  std::optional<size_t> expected_outputs;
  // The reference's outputs, when known (e.g. after running it once): their number,
  // shapes and dtypes must match the plan's outputs. Empty: not checked.
  std::vector<tensor_info> reference_outputs;
};

// The context for `task`'s inputs and parameters (at the named size from
// task_spec::sizes, or the default shapes when `size` is empty) and the kernels of
// `source`. Fails when `size` is not one of the task's sizes.
result<plan_context> make_plan_context(const task_spec& task, std::string_view source, std::string_view size = {});

enum class buffer_role : uint8_t {
  input,         // given by the reference: an input or a parameter
  output,        // declared under outputs:, returned in order
  scratch,       // declared under scratch:, freed after the plan
  intermediate,  // produced by a library step under a new name
};
const char* to_string(buffer_role r);

// A tensor of a resolved plan, with its concrete shape.
struct resolved_buffer {
  std::string name;
  buffer_role role = buffer_role::scratch;
  std::vector<int64_t> shape;
  // False for the result of a library op without shape inference: shape and dtype are
  // then empty and known only when the plan runs.
  bool shape_known = true;
  std::string dtype;
  std::string init;  // outputs and scratch: "none" or "zeros"; otherwise empty
  int64_t numel() const;
  int64_t bytes() const;
  friend bool operator==(const resolved_buffer&, const resolved_buffer&) = default;
};

// One argument with its value: a tensor's name, or a typed number.
struct resolved_arg {
  std::string kind;    // "tensor", "int" or "float", as in plan_arg
  std::string tensor;  // kind "tensor"
  std::string type;    // kind "int"/"float": int32, int64, float32 or float64
  int64_t int_value = 0;
  double float_value = 0;
  friend bool operator==(const resolved_arg&, const resolved_arg&) = default;
};
// The tensor a tensor argument names, in either form of a plan.
inline const std::string& arg_tensor_name(const resolved_arg& a) { return a.tensor; }
inline const std::string& arg_tensor_name(const plan_arg& a) { return a.value; }

// One step with every expression evaluated.
struct resolved_step {
  size_t index = 0;
  std::string kind;  // "kernel" or "library"
  std::string name;  // kernel name or ATen op
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t shared_mem_bytes = 0;
  std::vector<resolved_arg> args;
  std::vector<std::string> outputs;  // library steps
  std::map<std::string, std::string> attrs;
  // Tensors the step may write: a kernel's non-const pointer arguments, a library
  // step's outputs.
  std::vector<std::string> writes;
  // "step 2 (kernel softmax_rows)": how messages name this step.
  std::string label() const;
  friend bool operator==(const resolved_step&, const resolved_step&) = default;
};

// A plan bound to concrete shapes: what an executor allocates and launches.
struct resolved_plan {
  std::map<std::string, expr_value> constants;
  std::vector<resolved_buffer> outputs;  // in the plan's (= the reference's) order
  std::vector<resolved_buffer> scratch;
  std::vector<resolved_buffer> intermediates;  // in the order steps produce them
  std::vector<resolved_step> steps;
  // Things that are allowed but probably wrong (an input passed to a non-const
  // pointer, a block that is not a whole number of warps, unused scratch).
  std::vector<std::string> warnings;
  // An output, scratch or intermediate buffer by name, or nullptr.
  const resolved_buffer* find_buffer(std::string_view name) const;
};

// Checks `plan` against `context` and evaluates it. Returns the first error found.
result<resolved_plan> resolve_plan(const launch_plan& plan, const plan_context& context);

// The tensors that some kernel step of the plan takes as an argument. A library
// step's new intermediate that none of them reads may stay as the op returned it (a
// transposed view, say: the next library op takes its strides, as eager does);
// one that a kernel reads is made contiguous, as kernels index it row-major.
// For a launch_plan or a resolved_plan.
template <class Plan>
std::set<std::string> tensors_read_by_kernels(const Plan& plan) {
  std::set<std::string> out;
  for (const auto& s : plan.steps)
    if (s.kind == "kernel")
      for (const auto& a : s.args)
        if (a.kind == "tensor") out.insert(arg_tensor_name(a));
  return out;
}

// The outputs whose last writer is a library step. A library op may sum in an order
// that changes from run to run (cuDNN's grouped transposed convolutions, atomics in
// scatter/index_add): the reviewer holds these to the tolerance between two runs, not to
// bitwise equality, which it keeps for what the plan's own kernels write.
template <class Plan>
std::set<std::string> outputs_last_written_by_library(const Plan& plan) {
  std::map<std::string, bool> by_library;
  for (const auto& s : plan.steps)
    for (const auto& w : s.writes) by_library[w] = s.kind == "library";
  std::set<std::string> out;
  for (const auto& o : plan.outputs)
    if (auto it = by_library.find(o.name); it != by_library.end() && it->second) out.insert(o.name);
  return out;
}

// Where a library step's result goes. The reviewer's plan runner and the exported
// launchers both ask this, so that a plan runs the same way in both.
enum class result_target {
  kernel_intermediate,   // a new intermediate a kernel step reads: made contiguous
  library_intermediate,  // a new intermediate only library steps read: as the op returned it
  buffer,                // a declared output, or scratch a kernel touches: taken or copied into
  library_scratch,       // declared scratch no kernel touches: stands for the result as returned
};
// `declared`: an output or scratch buffer; `scratch`: scratch; `touched_by_kernel`:
// among tensors_read_by_kernels (a kernel's argument).
result_target target_of(bool declared, bool scratch, bool touched_by_kernel);

// "[128, 64]"; "[]" for a 0-d tensor.
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace ks
