#pragma once
// Imports KernelBench problem files (`class Model`, `get_inputs()`,
// `get_init_inputs()`) as task files: `kernelskill import kernelbench`.
//
// What it promises:
// - each problem runs in its own child (the user's Python with PyTorch, running
//   importer/kernelbench_problem.py, embedded in this binary) bounded by `limits`, in a
//   private directory: a problem that hangs, allocates without end, crashes, writes
//   files or reaches for the network fails alone, with a message naming the file and
//   the reason, and the other problems are still imported;
// - an imported task is a task file NAME.yaml with its module NAME.pt in `out_dir`
//   (docs/kernelbench.md says what they hold), and it loads with task/task_loader.hpp:
//   a problem whose task would not load is reported as failed, never left behind;
// - a problem file is never changed, and nothing is written outside `out_dir`.
//
// LibTorch-free: the C++ side only runs the child and checks what it wrote.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/bounded_child.hpp"
#include "base/result.hpp"

namespace ks {

struct kernelbench_import_options {
  std::string python = "python3";  // with torch importable
  uint64_t seed = 42;              // KernelBench's evaluator's default seed
  double trace_gib = 4.0;          // inputs a traced import may materialise
  process_limits limits{.cpu_seconds = 300, .memory_mb = 16384, .wall_seconds = 600, .sandbox = {}};
};

struct problem_file {
  std::filesystem::path path;
  std::string task_name;         // the file's stem ("19_ReLU")
  std::filesystem::path subdir;  // under out_dir ("level1" for a file found in DIR/level1)
};

struct import_outcome {
  problem_file problem;
  std::filesystem::path task_path;  // empty on failure
  std::string error;                // empty on success
  std::vector<std::string> notes;   // what the import chose (tracing, constants)
  uint32_t inputs = 0, parameters = 0;
  bool input_program = false;
  double seconds = 0;
  bool ok() const { return error.empty(); }
};

// The problem files among `paths`: each file as given, each directory searched
// recursively for *.py (sorted; __init__.py skipped), kept under the name of the
// directory it was found in. Fails naming a path that does not exist.
result<std::vector<problem_file>> find_problem_files(const std::vector<std::string>& paths);

// Imports one problem into out_dir / problem.subdir.
import_outcome import_kernelbench_problem(const problem_file& problem, const std::filesystem::path& out_dir,
                                          const kernelbench_import_options& options);

// Checks that options.python runs and imports torch; the error says how to fix it.
status check_python(const kernelbench_import_options& options);

// The script the child runs (importer/kernelbench_problem.py).
std::string_view kernelbench_problem_script();

}  // namespace ks
