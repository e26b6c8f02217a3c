#pragma once
// The LibTorch reference runner: compiles a task's TorchScript (or loads its saved
// module), makes its inputs and parameters deterministically from the task's specs,
// and runs it on the CPU or a CUDA device. This header is LibTorch-free so that any
// part of the worker can use it cheaply; the verifier, which needs the tensors
// themselves, uses gpu/torch_reference_tensors.hpp.
//
// Determinism: parameters are drawn once per program from the task seed; inputs are
// drawn per trial from trial_seed(task.seed, k), where input_draw says (below): on the
// CPU and copied to the device, so that every device sees bit-identical values, or on
// the device itself, which is much faster for large tensors and the same on every run
// on the same GPU model and PyTorch build (docs/reviewer.md, "Where inputs are drawn").

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "model/task.hpp"

namespace ks {

// Where the random tensors of a task (inputs, and parameters of random kinds) are drawn.
//  cpu:    from a CPU generator (Mersenne Twister) on the CPU, then copied to the device:
//          the same values on every device and machine with the same PyTorch version.
//  device: on the device the reference runs on. On the CPU that is the cpu scheme
//          itself. On a CUDA device each tensor is drawn from its own Philox generator
//          seeded from (seed, the tensor's index); an input_program runs on the device
//          with the device's default generator seeded. Deterministic for a given GPU
//          model and PyTorch build; PyTorch's launch configuration depends on the SM
//          count, so other GPU models may draw other values for large tensors.
enum class input_draw : uint8_t { device, cpu };
const char* to_string(input_draw d);
// "device" or "cpu"; the error names both.
result<input_draw> parse_input_draw(const std::string& name);

struct reference_options {
  // "cpu", "cuda" (device 0) or "cuda:N".
  std::string device = "cpu";
  // LibTorch's intra-op threads (at::set_num_threads, a process-wide setting);
  // 0 = the hardware concurrency.
  int threads = 0;
  // false (the default) runs the TorchScript graph op by op, as eager PyTorch would:
  // speedups are quoted against eager PyTorch, as in KernelBench, not against
  // TorchScript's own fusers. The setting is process-wide in LibTorch.
  bool jit_optimize = false;
  // Where inputs and random parameters are drawn. cpu (the default here) keeps a
  // program's values independent of its device; the reviewer passes
  // review_options::draw_inputs, which defaults to device.
  input_draw draw = input_draw::cpu;
};

// A numerical fingerprint of one output tensor, computed in float64. sum, mean, min,
// max and abs_max are over the finite elements; nan_count and inf_count count the rest.
struct tensor_summary {
  std::vector<int64_t> shape;
  std::string dtype;  // float32, float16, bfloat16, float64, int32, int64, bool, ...
  int64_t numel = 0;
  double sum = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double abs_max = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
};

// What one run of the reference produced.
struct reference_outputs {
  uint64_t trial_seed = 0;
  std::vector<tensor_summary> outputs;  // in the order forward returns them
  double inputs_ms = 0;                 // making the inputs (a device draw, or a CPU draw and a copy)
  double forward_ms = 0;                // forward alone, device synchronised
};

// One task's reference, ready to run. Not thread-safe: one run at a time.
// Compiles or loads the task's reference on the CPU and checks its operators
// (gpu/reference_ops.hpp) and its arity, running nothing of it: what `kernelskill task
// check` asks of a reference (through kernelskill-gpu --check-reference).
status check_reference_code(const task_spec& task);

class reference_program {
 public:
  // Compiles or loads the task's reference on options.device. Errors name the task:
  // a TorchScript compile error (with the compiler's message), a missing forward, an
  // unreadable module, an unavailable device, or a parameter that cannot be made.
  static result<std::unique_ptr<reference_program>> load(const task_spec& task, const reference_options& options = {});
  ~reference_program();
  reference_program(const reference_program&) = delete;
  reference_program& operator=(const reference_program&) = delete;

  // Makes the inputs for `trial_seed`, runs forward, and summarises each output
  // (forward may return a tensor or a tuple/list of tensors).
  result<reference_outputs> run(uint64_t trial_seed);

  const task_spec& task() const;
  // The device as LibTorch names it ("cpu", "cuda:0").
  std::string device() const;
  // Where its inputs and random parameters are drawn (reference_options::draw).
  input_draw draw() const;

 private:
  struct impl;
  friend struct reference_access;  // gpu/torch_reference_tensors.hpp
  explicit reference_program(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

// The seed of trial `trial` of a task: deterministic, and distinct for distinct
// trials of the same task seed (a bijective mix, splitmix64).
uint64_t trial_seed(uint64_t task_seed, uint32_t trial);

}  // namespace ks
