#pragma once
// A plan's library steps in the launcher the exporter writes: the at:: call of each op
// the reviewer runs by name (gpu/library_ops.cpp's table: aten::matmul → at::matmul,
// conv2d with its stride/padding/dilation/groups, …), the dispatcher call of a step
// that carries attrs.schema (prepared once per module by ks_prepare_by_schema, then
// ks_call_prepared: gpu/dispatch_runtime.hpp in the module), and the block that takes the results into declared buffers
// or new intermediates. Both launchers (export/size_launcher.hpp, export/general_launcher.hpp) write their library
// steps with these.
//
// What it promises: an op or attribute the reviewer would not run the same way is an
// error that names it, never a different call.

#include <functional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "plan/plan_validator.hpp"

namespace ks::export_detail {

// A library step's call: an at::Tensor expression for a table op, a
// std::vector<at::Tensor> one for a dispatcher step; `pre` declares what it needs
// (conv2d's integer lists; a dispatcher step's arguments and its prepared operator).
struct library_step_call {
  bool dispatcher = false;
  std::string pre;
  std::string call;
};

// The call of step `s` (its name and attrs; `outputs`, the tensors it names), given its
// arguments as C++ expressions twice: `args` for an at:: call (tensors: a variable;
// numbers: an at::Scalar) and `dispatch_args` for a dispatcher call (ks_arg
// expressions). Errors start with `label`: an op without an at:: counterpart, a wrong
// number or kind of arguments, an attribute that does not read, outputs that do not fit.
result<library_step_call> library_step(const std::string& label, const resolved_step& s,
                                       const std::vector<std::string>& outputs, const std::vector<std::string>& args,
                                       const std::vector<std::string>& dispatch_args,
                                       const std::vector<bool>& is_tensor);

// The C++ block that runs `c` and takes its results, by `target` (plan/'s target_of,
// as the reviewer decides it): a buffer is checked
// against the result, then becomes the result where ks::result_adoption::adoptable
// allows (gpu/result_adoption.hpp, in the module) and is copied into otherwise (a
// transposed view of an input is a scratch no kernel touches, say: taken as it is, so
// the next library op gets the view's strides, as in eager); a new intermediate is
// declared in `decls` (before the block, so that later steps see it). `operands`: the
// step's tensor arguments, which an adopted result must not share memory with (the
// only memory an op's result can share: see gpu/result_adoption.hpp).
std::string library_results(const std::string& label, const std::vector<std::string>& outputs,
                            const library_step_call& c, const std::function<result_target(const std::string&)>& target,
                            const std::vector<std::string>& operands, std::string& decls);

}  // namespace ks::export_detail
