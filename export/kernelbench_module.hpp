#pragma once
// The KernelBench side of an exported module: for a task imported from a KernelBench
// problem (task_spec::kernelbench, written by `kernelskill import kernelbench`), the
// Python that gives the file KernelBench's interface, so that KernelBench's own
// evaluator (`eval_kernel_against_ref`) can judge the kernel as it judges any ModelNew.
//
// What it promises (docs/export.md, "KernelBench's interface"):
// - the file carries the problem's own source and runs it once, at import, in a
//   namespace of its own (its module-level names neither leak nor clash);
//   get_inputs and get_init_inputs are the problem's own;
// - ModelNew(*init_inputs) builds the problem's Model(*init_inputs) before anything else
//   draws from torch's generator, and keeps it as constructed (training mode), so under
//   the caller's seed it holds exactly Model's weights; nothing is compiled then;
// - forward has Model.forward's signature; it hands the kernel the task's inputs in the
//   task's order, then the task's parameters read from that Model at call time by their
//   attribute paths (so .to() / .cuda() on ModelNew moves them), building the extension
//   on the first call; a number argument other than the one the kernel was made with,
//   a keyword argument forward does not take, or a model switched out of the mode the
//   kernel computes is refused with an error that names it (model.reference(...) runs
//   the problem's Model instead), never silently computed with the wrong constant.
//
// Text generation only, like the rest of the export.
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "model/task.hpp"

namespace ks::export_detail {

// True where the task came from a KernelBench problem (its export has this interface).
bool has_kernelbench_interface(const task_spec& task);

// The module's KernelBench constants (PROBLEM_SOURCE, ARGUMENTS, MODEL_PARAMETERS,
// TRAINING), or an error naming what the export cannot use: an argument naming no task
// input, a parameter that is not a module attribute inside the problem's Model, a
// number that is not one.
result<std::string> kernelbench_constants(const task_spec& task);

// The file's docstring, for `sizes` (the export's sizes) and whether other shapes run a
// general launcher.
std::string kernelbench_docstring(const task_spec& task, const std::string& sizes, bool general);

// The code after load_extension(): the problem's namespace, get_inputs,
// get_init_inputs and class ModelNew (export/kernelbench_model_new.py).
std::string kernelbench_module_code();
// export/kernelbench_model_new.py's bytes, embedded at build time (export/CMakeLists.txt).
std::string_view kernelbench_model_new_py();

}  // namespace ks::export_detail
