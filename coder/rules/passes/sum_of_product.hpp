#pragma once
// A sum (or mean) over a product's output features becomes a matrix-vector product.
//
// Summing a linear layer's outputs over its features needs no matrix product at all:
//
//   y = linear(x, W, b)            ->   w = sum(W, [0])          (the weight's columns: [K])
//   s = sum(y, [-1], keepdim)           s = sum(x * w, [-1], keepdim) + sum(b)
//
// (mm/matmul(x, B) with B [K, N]: w = sum(B, [1]); a mean divides w and the bias's sum
// by N instead: mean(W, [0]), mean(b).) The product's 2·M·N·K FLOPs become one read of
// the weight and one of x: on KernelBench level 2's 18_Matmul_Sum_... (1024 x 8192 x
// 8192) a 2.8 ms SGEMM becomes two passes of well under a tenth of that. The result is
// the same sum in another order. The weight's sum is accumulated in float64 (ATen's
// reduction, through the dispatcher) and rounded once: each of its K elements enters
// the dot with x, so FP32 errors in them would add up over K (a column summed in float
// was 1.8e-4 off a result of 0.064 on the H200, beyond 1e-4); the dot itself is a row
// reduction of products, as accurate as the reference's own sum of the outputs.
//
// What it promises:
// - only a linear (or mm/matmul) of a 2-d float32 input x [M, K] whose result is read by
//   nothing but one sum or mean over its last dim (dims [1] or [-1], no dtype), and is
//   no output of the graph, is rewritten; the reduction's result keeps its value id;
// - new values have ids no graph export gives ("ks.sum_of_product.N.…");
// - each rewrite adds a line to `rewrites` ("aten::linear + aten::sum: ..."), which the
//   candidate's origin shows.

#include <string>
#include <vector>

#include "coder/task_graph.hpp"

namespace ks::rules {

task_graph sum_of_products(const task_graph& graph, std::vector<std::string>& rewrites);

}  // namespace ks::rules
