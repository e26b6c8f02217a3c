#pragma once
// Task files: a reference program and how to make its inputs, as YAML (the format is
// described in docs/task-format.md). Loading validates everything that can be checked
// without LibTorch, so that the daemon rejects a bad task before any GPU worker sees
// it; whether the TorchScript compiles is the reference runner's business
// (gpu/torch_reference.hpp).
//
// Every error names the file, line and column, the key and what was expected, e.g.
//   gelu.yaml:5:3: inputs[0].shape: expected a list of positive integers, got "big"

#include <filesystem>
#include <string>

#include "base/result.hpp"
#include "model/task.hpp"

namespace ks {

// Reads and validates the task file at `path`. A `reference.module` is resolved
// against the file's folder, mapped into module_bytes (base/shared_bytes.hpp: the file
// must not be rewritten in place while the task is in use), and its absolute path
// recorded in module_path.
result<task_spec> load_task(const std::filesystem::path& path);

// Parses task YAML held in memory. `source_name` prefixes every error message (a file
// name, or something like "<request 17>"); `base_dir` is where a relative
// `reference.module` path is looked up.
result<task_spec> parse_task(const std::string& yaml, const std::string& source_name,
                             const std::filesystem::path& base_dir);

// Checks a task_spec that did not come from YAML (e.g. one received over the wire):
// the same rules as parse_task, with the key path but no line numbers.
status validate_task(const task_spec& task);

// The task with its shapes replaced by the named entry of `sizes` (tensors the entry
// does not name keep their shapes). Error if the size is unknown, or if it names a
// tensor the task does not have or changes a tensor's rank.
result<task_spec> with_size(const task_spec& task, const std::string& size_name);

// YAML that parse_task reads back into an equal task_spec. A module is written as its
// module_path (absolute after load_task), never inlined.
std::string to_yaml(const task_spec& task);
// The same, naming the module by `module_path` instead of the task's own (where its
// bytes were written elsewhere: a copy of the task to change the path would copy them).
std::string to_yaml(const task_spec& task, const std::string& module_path);

// The tolerance a task gets when its file gives none: the loosest default among its
// floating-point inputs and parameters (float32/float64 1e-4, float16 1e-2, bfloat16
// 2e-2), as the outputs of such a program are computed in that precision.
tolerance_spec default_tolerance(const task_spec& task);

}  // namespace ks
