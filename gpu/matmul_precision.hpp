#ifndef KS_GPU_MATMUL_PRECISION_HPP
#define KS_GPU_MATMUL_PRECISION_HPP
// A library product (mm, matmul, bmm, addmm, linear) run with cuBLAS allowed TF32
// tensor cores, for one call: the rules coder's split-precision GEMM (3xTF32,
// coder/rules/templates/split_tf32.hpp) hands cuBLAS operands that are already exact TF32
// values, big and small halves side by side along K, so TF32 loses nothing there and
// the product keeps FP32 accuracy at tensor-core speed. Every other product keeps
// ATen's setting (TF32 off for matmul by default, as KernelBench's reference runs it).
// Two programs run such steps: the reviewer's library ops (gpu/library_ops.cpp) and an
// exported module's launcher (export/ embeds this file's text in the module it writes).
//
// What it promises: the setting is what it was after the call, also when the call
// throws; a process that already allows TF32 is left alone. The setting is the
// process's: a product on another host thread meanwhile would see it too (the reviewer
// and a module run their steps from one thread).
//
// ATen only; C++17; include guards rather than #pragma once (the text is pasted into
// the module's main source file).

#include <ATen/Context.h>

namespace ks {
namespace matmul_precision {

// Calls f() with cuBLAS TF32 allowed and returns what it returns.
template <class F>
auto with_tf32(F&& f) -> decltype(f()) {
  at::Context& ctx = at::globalContext();
  if (ctx.allowTF32CuBLAS()) return f();
  struct restore {
    at::Context& ctx;
    ~restore() { ctx.setAllowTF32CuBLAS(false); }
  } guard{ctx};
  ctx.setAllowTF32CuBLAS(true);
  return f();
}

}  // namespace matmul_precision
}  // namespace ks

#endif  // KS_GPU_MATMUL_PRECISION_HPP
