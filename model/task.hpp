#pragma once
// Tasks: a reference program and how to make its inputs. Plain structs, each with its
// field list (model/fields.hpp). Loaded from YAML by task/task_loader.hpp; the format
// is docs/task-format.md.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/shared_bytes.hpp"
#include "model/fields.hpp"

namespace ks {

// How the values of an input or a parameter are drawn. Kinds:
//   normal(mean, std), uniform(low, high), randint(low, high) — integers in [low, high),
//   constant(value), zeros, ones, arange (0, 1, 2, … reshaped), and for parameters
//   kaiming_uniform: uniform(±1/sqrt(fan_in)) as torch.nn.Linear/Conv initialise.
//   Two kinds draw nothing themselves: `module` (a parameter: the value of the module
//   reference's attribute `attr`, e.g. "bn.weight") and `program` (an input: made by
//   the task's input_program).
struct distribution_spec {
  std::string kind = "normal";
  double mean = 0.0;
  double std = 1.0;
  double low = 0.0;
  double high = 1.0;
  double value = 0.0;
  std::string attr;
  friend bool operator==(const distribution_spec&, const distribution_spec&) = default;
};
template <class F>
auto visit_fields(distribution_spec& x, F&& f) {
  return f("distribution_spec", KS_FIELD(kind), KS_FIELD(mean), KS_FIELD(std), KS_FIELD(low), KS_FIELD(high),
           KS_FIELD(value), KS_FIELD(attr));
}

// One tensor of the reference's signature (an input, or a parameter that is passed
// after the inputs). dtype is a torch name: float32, float16, bfloat16, float64,
// int32, int64, bool.
struct tensor_spec {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  distribution_spec init;
  friend bool operator==(const tensor_spec&, const tensor_spec&) = default;
};
template <class F>
auto visit_fields(tensor_spec& x, F&& f) {
  return f("tensor_spec", KS_FIELD(name), KS_FIELD(shape), KS_FIELD(dtype), KS_FIELD(init));
}

// Per-dtype comparison: |out - ref| <= atol + rtol * |ref| element-wise.
struct tolerance_spec {
  double atol = 1e-4;
  double rtol = 1e-4;
  friend bool operator==(const tolerance_spec&, const tolerance_spec&) = default;
};
template <class F>
auto visit_fields(tolerance_spec& x, F&& f) {
  return f("tolerance_spec", KS_FIELD(atol), KS_FIELD(rtol));
}

// Model.forward's argument at one position of what the problem's get_inputs() returns:
// a tensor (the task input `input`) or a number (`value`, as Python writes it: "3.14",
// "2", "True", "inf"), which the module and so the kernel hold as a constant.
struct kernelbench_argument {
  std::string name;   // forward's own name for it (or the task input's, which is unique)
  std::string input;  // the task input it is, or empty
  std::string value;  // else the number get_inputs passed
  friend bool operator==(const kernelbench_argument&, const kernelbench_argument&) = default;
};
template <class F>
auto visit_fields(kernelbench_argument& x, F&& f) {
  return f("kernelbench_argument", KS_FIELD(name), KS_FIELD(input), KS_FIELD(value));
}

// The KernelBench problem a task was imported from (`kernelskill import kernelbench`):
// what `kernelskill export` needs to write a ModelNew with KernelBench's interface
// (docs/kernelbench.md). Empty source: the task is not from KernelBench.
struct kernelbench_spec {
  std::string source;  // the problem file's Python source, as imported
  // Where the problem's Model sits in the module reference: empty when the module is
  // Model itself (scripted), "inner" when Model was traced inside a wrapper. Every
  // parameter's `attr` starts with it.
  std::string model_attr;
  std::vector<kernelbench_argument> arguments;  // one per value get_inputs returns
  friend bool operator==(const kernelbench_spec&, const kernelbench_spec&) = default;
};
template <class F>
auto visit_fields(kernelbench_spec& x, F&& f) {
  return f("kernelbench_spec", KS_FIELD(source), KS_FIELD(model_attr), KS_FIELD(arguments));
}

// A task: what to make faster. The reference is TorchScript source defining
// `forward(inputs..., parameters...)`, or the bytes of a TorchScript module saved with
// torch.jit.save (whose forward takes the inputs only; the tensors it reads from its
// own attributes are declared as parameters of kind `module`). Loaded from YAML by
// task/task_loader.hpp; see docs/task-format.md.
struct task_spec {
  std::string name;
  std::string description;
  std::string torchscript;       // inline source, or empty
  shared_bytes module_bytes;     // a saved .pt module, or empty (copies share it)
  std::string module_path;       // where module_bytes came from (for messages)
  bool module_training = false;  // run the module in training mode (else eval)
  std::vector<tensor_spec> inputs;
  // TorchScript defining `inputs(device: Device) -> List[Tensor]`, which makes every
  // input (all of kind `program`) from the default generator; empty when each input
  // has its own distribution.
  std::string input_program;
  std::vector<tensor_spec> parameters;
  tolerance_spec tolerance;
  uint64_t seed = 0;  // base seed; trial k uses a seed derived from it
  // Named alternative shapes ("cpu", "small", …): size name → tensor name → shape.
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> sizes;
  kernelbench_spec kernelbench;  // the KernelBench problem it came from, if any
  friend bool operator==(const task_spec&, const task_spec&) = default;
};
template <class F>
auto visit_fields(task_spec& x, F&& f) {
  return f("task_spec", KS_FIELD(name), KS_FIELD(description), KS_FIELD(torchscript), KS_FIELD(module_bytes),
           KS_FIELD(module_path), KS_FIELD(module_training), KS_FIELD(inputs), KS_FIELD(input_program),
           KS_FIELD(parameters), KS_FIELD(tolerance), KS_FIELD(seed), KS_FIELD(sizes), KS_FIELD(kernelbench));
}

}  // namespace ks
