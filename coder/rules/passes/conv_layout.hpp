#pragma once
// A convolution computed channels-last and read so by the kernels after it.
//
// Given an NCHW input, cuDNN's fp32 convolution converts it to NHWC, computes there and
// converts the result back: on KernelBench level 2's 25_Conv2d_Min_Tanh_Tanh 1.55 ms of
// the 3.73 of ours were those conversions, and cuDNN has a faster kernel for NHWC
// input (1_Conv2D_ReLU_BiasAdd: 0.84 ms against 1.55). torch.compile converts the
// input itself and reads the NHWC result in its fused epilogue. Here:
//
//   y = conv2d(x, w, ...)  [N, C, H, W]   ->   y' = ks::conv2d_nhwc(x, w, ...)   [N, H, W, C]
//   z = f(y, bias [C,1,1]) [N, C, H, W]        z' = f(y', reshape(bias, [C]))     [N, H, W, C]
//   m = amin(z, [1], keepdim)                 m' = amin(z', [3], keepdim)        [N, H, W, 1]
//   out = z (or m)                            out = permute(z', [0, 3, 1, 2])
//
// The library step runs the convolution on channels-last input and weight and hands on
// its result as [N, H, W, C] (a view of cuDNN's channels-last result, no copy); every
// value computed from it is computed in that order (a "twin" of the original value,
// its dims permuted [0, 2, 3, 1]), a reduction over the channels becomes one over the
// last dim (short contiguous rows), and a returned value comes back to NCHW through a
// permute, which the elementwise chain that makes it takes as its store (a tile
// transposed in shared memory: stages.cpp, transpose_store.cpp); what no chain makes
// (the convolution's own result returned, a softmax) goes through an aten::clone, a
// chain of its own that copies it back. The values and the
// order of every sum are the same as in NCHW order: only where they sit in memory moves.
//
// What it promises:
// - only an aten::conv2d or aten::conv_transpose2d of a 4-d float32 input (or an
//   aten::conv3d or aten::conv_transpose3d of a 5-d one: every [N, H, W, C] here is
//   then [N, D, H, W, C], every permute back [0, 4, 1, 2, 3]) whose
//   result is returned, or read, directly or through the values computed from it, by
//   nothing but elementwise ops and reductions
//   over the channel dim alone (sum, mean, amax, amin, max/min with unused indices,
//   logsumexp, softmax, log_softmax) is rewritten; every other tensor operand of those
//   ops must keep its memory under the permutation (a bias [C, 1, 1], a scalar, [N, 1,
//   1, 1], [1, 1, H, W]: read through a reshape of a graph input, or as it is); any other
//   reader (a norm over H and W, a pool, a size, a library op) leaves the graph as it is,
//   but for a transposed convolution's or the graph's only convolution's: that reader
//   is left in NCHW order, reading the original value, which the chain that makes its
//   twin stores back (a transposed tile into a buffer of its own) or a clone copies
//   back;
// - a reduction over the channels without keepdim gives the original value itself
//   (the same memory in either order), and the graph goes on unchanged from there;
// - graph outputs keep their ids and shapes; new values have ids no graph export gives
//   ("ks.nhwc.N.…"); each rewrite adds a line to `rewrites`.

#include <string>
#include <vector>

#include "coder/task_graph.hpp"

namespace ks::rules {

// The twins' kinds (ks::conv2d_nhwc, ...) and which of them run through their ATen
// schema are the plan layer's: coder/rules/plan/op_table.hpp.
task_graph channels_last_convolutions(const task_graph& graph, std::vector<std::string>& rewrites);

}  // namespace ks::rules
