#pragma once
// A task written to files for a child process that loads it (kernelskill-gpu --graph
// for the rules coder's graph export, --run-reference for the worker's reference
// check): the child reads a task file, and a module that came without one (uploaded to
// the daemon, or sent to a worker over the wire) needs one too.
//
// What it promises: DIR/task.yaml reads back (load_task) as the same task, its module
// (if any) at DIR/module.pt beside it; an error names the file it could not write.

#include <filesystem>

#include "base/result.hpp"
#include "model/task.hpp"

namespace ks {

// Writes `task` into `dir` (a private directory of the caller's) and returns the path
// of its YAML.
result<std::filesystem::path> write_task_files(const task_spec& task, const std::filesystem::path& dir);

}  // namespace ks
