#pragma once
// Export of a finished candidate as a PyTorch module: a self-contained Python file that
// defines `class ModelNew(torch.nn.Module)`, so that users — and KernelBench's own
// evaluator — can run the kernel that KernelSkill found without KernelSkill.
//
// The file holds the candidate's CUDA device code, as reviewed, plus a C++ launcher
// generated from its launch plan, and builds both with
// torch.utils.cpp_extension.load on first use (nvcc and a host compiler are
// needed there, as for any PyTorch extension). The launcher:
//   - takes the task's inputs, then its parameters, in the order the reference's
//     forward() takes them; checks count, device and dtype, makes them contiguous;
//   - runs the plan as the reviewer runs it, on PyTorch's current CUDA stream:
//     allocates outputs and scratch (at::zeros for `init: zeros`, else at::empty),
//     launches every kernel step with the grid, block and dynamic shared memory the
//     plan gives, and runs every library step as the matching at:: call
//     (aten::matmul → at::matmul, …; exactly the ops gpu/library_ops.hpp runs);
//   - for the shapes of the task (its default shapes and each named size at which
//     the plan resolves) runs a launcher specialised at export time: the plan's
//     expressions evaluated here, by the plan validator, so the numbers are the checked
//     ones;
//   - for any other shapes runs a general launcher in which the plan's expressions
//     (constants, buffer shapes, grid, block, shared memory, scalar arguments) are C++
//     evaluated at run time for the tensors received, with the expression language's
//     rules (integer-first, floor division, overflow and division by zero are errors),
//     grid/block/shared memory range-checked before the launch. Where the general
//     launcher cannot be generated (a plan reading a tensor's shape before the tensor
//     exists), other shapes raise a RuntimeError that lists the supported ones.
//
// Design choice for parameters: ModelNew owns the task's parameters as module
// parameters (requires_grad=False; buffers for non-floating dtypes), drawn as the
// task's `parameters:` section says, as torch.nn.Linear/Conv own theirs, and forward()
// takes the inputs only — KernelBench's ModelNew convention. `task_parameters()`
// returns them in the reference's order, so the reference can be called on the same
// values: reference(*inputs, *model.task_parameters()).
//
// The file also defines get_inputs() / get_init_inputs() (KernelBench's names), which
// draw the task's inputs as the task says (on the GPU, from a seeded generator; not the
// reviewer's exact values), and TOLERANCE, the task's comparison tolerance.
//
// A task imported from a KernelBench problem (task_spec::kernelbench) gets KernelBench's
// interface instead (export/kernelbench_module.hpp): ModelNew(*get_init_inputs()) builds
// the problem's own Model inside, so it holds Model's weights under the same seed, and
// forward takes Model.forward's arguments; get_inputs / get_init_inputs are the
// problem's. The kernel and its launcher are the same bytes either way.
//
// No LibTorch here: this is text generation over the plan validator's results.
#include <set>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "model/candidate.hpp"
#include "model/task.hpp"
#include "plan/plan_validator.hpp"

namespace ks {

struct pytorch_export_options {
  // The device the plan is checked against (grid, block and shared-memory limits).
  device_limits limits;
};

// An export in parts, for tools and tests that check the pieces separately.
struct pytorch_export {
  std::string module_name;  // the extension's name: ks_<task>_<hash of the sources>
  // What nvcc compiles (the module's load_extension): the candidate's device code, then
  // `launcher` only where the kernels take a parameter type the host compiler does not
  // know (a type the source defines): else the launcher is in cpp_source, and nothing
  // of PyTorch's is included before the kernels.
  std::string cuda_source;
  bool launcher_in_cuda = false;  // the case above: cuda_source is compiled after torch/types.h
  std::string launcher;           // the generated C++ launcher, which defines ks_forward
  // What the host compiler compiles (after torch/extension.h, before the binding of
  // ks_forward): headers, kernel_declarations and `launcher` (its tail); or, where the
  // launcher is in cuda_source, the declaration of ks_forward.
  std::string cpp_source;
  // Host declarations of the kernels the launcher launches (`extern "C" void k(...)`,
  // the source's own parameter lists: the host stubs nvcc defines), which cpp_source
  // launches through; and so that the launcher can be compiled with a host compiler
  // against stand-ins for ATen, without nvcc: KS_LAUNCH then becomes a plain call, which
  // checks every argument against the kernel's parameter.
  std::string kernel_declarations;
  std::vector<std::string> nvcc_options;  // from the candidate's compile options
  // The sizes the launcher is specialised for ("default", then the named sizes that
  // resolve), and the named sizes left out with the reason.
  std::vector<std::string> sizes;
  std::vector<std::string> skipped_sizes;
  // Why there is no general-shape launcher (empty: there is one).
  std::string general_launcher_note;
  std::string python;  // the whole Python file
};

// The export of `best` (a candidate for `task`, usually its best correct one), or an
// error that names what cannot be exported: a plan that does not resolve at the task's
// shapes, a library op without an at:: counterpart here, a kernel argument of a type a
// launcher cannot pass, a compile option without an nvcc equivalent.
result<pytorch_export> export_pytorch(const task_spec& task, const candidate& best,
                                      const pytorch_export_options& options = {});

// The Python file alone: export_pytorch(task, best).python.
result<std::string> pytorch_module_source(const task_spec& task, const candidate& best);

// The Python file of a result handed to others (the daemon's /api/tasks/ID/result): it
// runs only code this project wrote. A KernelBench problem's source, which the
// KernelBench interface runs at import, is left out: such a task exports with the
// plain interface (its parameters drawn as the task says).
result<std::string> shared_module_source(const task_spec& task, const candidate& best);

// The pieces of the general-shape launcher, for tests that compile and run them on the
// host against plan/shape_expr's evaluator.
namespace export_detail {
// The C++ helpers the translated expressions call: plan/expr_runtime.hpp, then
// export/launcher_expr.inc (needs TORCH_CHECK, at::Tensor's dim/size/numel and <string>
// before it).
const std::string& expression_runtime();
// The helpers of dispatcher steps: gpu/dispatch_runtime.hpp (the reviewer's way of
// calling an ATen op by its schema), then export/launcher_dispatch.inc (ks_arg,
// ks_targ/iarg/farg, ks_call_by_schema); emitted when a plan has one.
const std::string& dispatch_runtime();
// The helper of every library step's results: gpu/result_adoption.hpp (a result taken as
// the declared buffer instead of copied into it); emitted when a plan has a library step.
const std::string& library_results_runtime();
// gpu/matmul_precision.hpp: a product with cuBLAS allowed TF32 for one call.
const std::string& matmul_precision_runtime();
// KS_LAUNCH of a launcher in CPP_SOURCE: ks_launch(kernel, grid, block, smem, stream,
// args...) converts each argument to the kernel's parameter type and calls
// cudaLaunchKernel with their addresses (needs dim3, cudaStream_t, cudaLaunchKernel,
// <tuple> and <utility> before it).
const std::string& host_launch_runtime();
// `text` as a C++ expression of type ks_v: constants become c_NAME, tensors t_NAME.
// With `declarations`, as the general launcher writes it: every call it composes
// computed once into a `const ks_v e_N` appended there, the expression naming them.
result<std::string> translate_expression(const std::string& text, const std::set<std::string>& constants,
                                         const std::set<std::string>& tensors, std::string* declarations = nullptr);
}  // namespace export_detail

}  // namespace ks
