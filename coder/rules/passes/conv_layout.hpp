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
// chain of its own that copies it back. The kernels' values and the order of their
// sums are the same as in NCHW order (only where they sit in memory moves); the
// library's convolutions and batch norms sum in their channels-last order.
//
// What it promises:
// - only an aten::conv2d or aten::conv_transpose2d of a 4-d float32 input (or an
//   aten::conv3d or aten::conv_transpose3d of a 5-d one: every [N, H, W, C] here is
//   then [N, D, H, W, C], every permute back [0, 4, 1, 2, 3]) is rewritten, once
//   something reads its result or the graph returns it; every later convolution of
//   the same rank with it (on its NCHW input where no twin feeds it), so that a join
//   of branches (an Inception module's cat) reads twins only;
// - the values computed from it stay in that order where their op is elementwise
//   (every other tensor operand read as it is where the permutation keeps its memory:
//   a bias [C, 1, 1], a scalar, [N, 1, 1, 1], [1, 1, H, W], through a reshape of a
//   graph input; or, a value of the region's rank, through a permute into the twin's
//   order: a block's input added to its result), a reduction over the channel dim
//   alone (sum, mean, amax, amin, max/min with unused indices, logsumexp, softmax,
//   log_softmax), or a network's next
//   layer: a convolution, a max or average pool, an adaptive average pool or (in a
//   deep chain of normalisations, op_specs.hpp) a batch norm (op_table.hpp's
//   channels_last_layer) reading it as its input, which runs on
//   its memory through an NCHW view with channels-last strides (an aten::permute that
//   no kernel stores: stages.cpp), or a cat over the channels of such values (over the
//   last dim; an NCHW element, a dense block's input, through a permute into the
//   twin's order); x.size(d) reads the twin's size;
// - any other reader (a reduction over H, a layer norm, a view, a cat over another
//   dim) is left in NCHW order, reading the original value, which the chain that makes
//   its twin stores back (a transposed tile into a buffer of its own) or a clone copies
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
