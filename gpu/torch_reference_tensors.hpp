#pragma once
// The tensors behind gpu/torch_reference.hpp, for the parts of the worker that
// compare or time real outputs (the verifier, the timer). This header includes ATen's
// Tensor (a few seconds per translation unit); everything else should use the
// LibTorch-free torch_reference.hpp.

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "gpu/torch_reference.hpp"

namespace torch::jit {
struct Module;
}

namespace ks {

// The task's inputs for one trial, in declaration order, on `device`, from generators
// seeded with `trial_seed`. input_draw::cpu draws on the CPU and copies, so every
// device gets the same values; input_draw::device draws on `device` itself (on the CPU
// the two are one scheme). Float dtypes are drawn in float32 (float64 for float64) and
// cast; integer and bool dtypes are drawn in int64 and cast.
result<std::vector<at::Tensor>> make_inputs(const task_spec& task, uint64_t trial_seed, const c10::Device& device,
                                            input_draw draw = input_draw::cpu);

// The task's parameters, drawn the same way from the task seed itself (a module
// reference's: copies of its attributes, the module loaded from the task's bytes).
result<std::vector<at::Tensor>> make_parameters(const task_spec& task, const c10::Device& device,
                                                input_draw draw = input_draw::cpu);

// A module reference's parameters (kind module) from a module already loaded: copies
// of its attributes on `device`, each checked against the task's shape and dtype.
result<std::vector<at::Tensor>> module_parameters(const task_spec& task, const torch::jit::Module& module,
                                                  const c10::Device& device);

// Runs the program's forward on `inputs` (plus its parameters), without autograd,
// and returns its outputs as tensors. Does not synchronise the device.
result<std::vector<at::Tensor>> run_tensors(reference_program& program, const std::vector<at::Tensor>& inputs);

// The parameters the program passes after the inputs (empty for a module reference).
const std::vector<at::Tensor>& parameter_tensors(const reference_program& program);

c10::Device program_device(const reference_program& program);

// The summary run() reports, for any tensor.
tensor_summary summarize(const at::Tensor& tensor);

// Shared by every LibTorch-using file of the worker:
// LibTorch's message without the C++ backtrace that c10::Error appends.
std::string torch_message(const std::exception& e);
// The ATen scalar type of a task or plan dtype name (float32, bfloat16, …), or nullopt.
std::optional<at::ScalarType> scalar_type(const std::string& dtype);
// The task/plan dtype name of an ATen scalar type (ATen's own name for others).
std::string dtype_name(at::ScalarType t);

}  // namespace ks
