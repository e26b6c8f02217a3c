#pragma once
// A candidate's launch plan run on the CPU: its kernels through the emulator
// (kernel_emulator.hpp), its library steps through ATen on the CPU, as the reviewer runs
// them on the GPU. Test-only, as the emulator is: rules_emulation_test's correctness
// check and ks-emulate (bench/kernelbench/emulate.sh) both run candidates so.

#include <filesystem>
#include <vector>

#include <ATen/ATen.h>

#include "base/result.hpp"
#include "model/candidate.hpp"
#include "model/task.hpp"

namespace ks::test {

// Runs `c` at the shapes of `sized` (a task at the size the plan is resolved at) on
// `inputs` and the task's `params`; returns the plan's outputs. Every output and
// scratch buffer starts as NaN (zeros where the plan says so), so a kernel that leaves
// an element unwritten shows. The kernels are compiled under `work_dir`.
result<std::vector<at::Tensor>> run_candidate_on_cpu(const task_spec& sized, const candidate& c,
                                                     const std::vector<at::Tensor>& inputs,
                                                     const std::vector<at::Tensor>& params,
                                                     const std::filesystem::path& work_dir);

}  // namespace ks::test
