#pragma once
// The run-time helpers that an exported module's launcher carries, as text: the files
// named below, embedded into ks_export at build time (export/CMakeLists.txt, through
// cmake/embed_file.cmake), so that the module computes with the very code the plan
// evaluator and the reviewer run instead of a copy of it.
//
// What it promises: each function returns its file's bytes exactly, valid for the life
// of the program; a change to the file is in the next build.

#include <string_view>

namespace ks::embedded {

// plan/expr_runtime.hpp: the expression language's arithmetic (standard library only).
std::string_view expr_runtime_hpp();
// export/launcher_expr.inc: the ks_ functions the translated expressions call, over it.
std::string_view launcher_expr_inc();
// gpu/dispatch_runtime.hpp: calling an ATen op by its schema (ATen/c10 only).
std::string_view dispatch_runtime_hpp();
// export/launcher_dispatch.inc: the module's arguments, readers and errors, over it.
std::string_view launcher_dispatch_inc();
// gpu/result_adoption.hpp: taking a library step's result as its declared buffer (ATen only).
std::string_view result_adoption_hpp();
// gpu/matmul_precision.hpp: a product run with cuBLAS allowed TF32 (ATen only).
std::string_view matmul_precision_hpp();
// export/cuda_graph.py: a ModelNew's CUDA graph replay of launch-bound sizes (Python).
std::string_view cuda_graph_py();

}  // namespace ks::embedded
