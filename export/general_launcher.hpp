#pragma once
// The general-shape launcher of an exported module: the launch plan with every
// expression (constants in dependency order, buffer shapes, grid, block, shared memory,
// scalar arguments) translated to C++ over ks_v values, so that it is evaluated for the
// shapes of the tensors forward() receives — with the expression language's rules,
// plan/expr_runtime.hpp's arithmetic itself, which the module carries
// (export/launcher_expr.inc) — and grid, block and shared memory range-checked before
// each launch.
//
// What it promises: an expression means in the module what it means to the plan
// evaluator (plan/shape_expr.hpp); where the launcher cannot be written (a plan that
// reads a tensor's shape before the tensor exists in the generated code, a constant
// cycle) the result is an error saying why, and the module then has only its
// size-specialised launchers.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "model/launch_plan.hpp"
#include "model/task.hpp"
#include "plan/kernel_signatures.hpp"

namespace ks::export_detail {

// `static std::vector<at::Tensor> ks_run_general(const std::vector<at::Tensor>& in)`.
result<std::string> general_function(const task_spec& task, const launch_plan& plan,
                                     const std::vector<kernel_signature>& kernels);

// `text` as a C++ expression of type ks_v: constants (of `constants`) become c_NAME;
// `tensor` gives a tensor's C++ variable, or empty where it is not available. With
// `declarations`, every call it composes is computed once: `shared` maps a call's text
// to the `const ks_v e_N` holding it, and a new one's declaration is appended to
// `declarations` (the general launcher keeps one map for its whole function).
result<std::string> translate(const std::string& text, const std::set<std::string>& constants,
                              const std::function<std::string(const std::string&)>& tensor,
                              std::map<std::string, std::string>* shared = nullptr,
                              std::string* declarations = nullptr);

}  // namespace ks::export_detail
