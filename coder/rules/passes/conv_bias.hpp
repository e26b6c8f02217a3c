#pragma once
// A convolution's bias added by the kernel after it instead of by ATen.
//
// ATen's cuDNN convolutions (conv1d/2d/3d, the transposed ones, _convolution) run the bias as a
// separate add over the whole output: one more read and write of the largest tensor
// of the graph (1.6 ms of 4.6 on KernelBench level 2's 25_Conv2d_Min_Tanh_Tanh at its
// published size). When a template's kernel reads the convolution's result anyway,
// the bias joins that kernel's prologue or chain for nothing:
//
//   y = conv(x, w, b, ...)   ->   r = conv(x, w, None, ...)
//                                 y = add(r, unsqueeze(b, -1) ... (rank - 2 times))
//
// The add is the same fp32 add ATen does after cuDNN (one rounding of r + b), so the
// result is the same to the bit wherever ATen adds the bias separately.
//
// What it promises:
// - only a convolution whose bias is a float32 input of the graph of shape [C] (C the
//   result's dim 1, the result of rank 3 or more), whose result is not an output of the
//   graph, and whose every reader is an elementwise op or a reduction (whose kernels
//   take the add into their chain or prologue) is rewritten: anywhere else (a pool, a
//   library op) the add would be a kernel of its own, no faster than ATen's;
// - the result keeps its value id (its readers are unchanged); new values have ids no
//   graph export gives ("ks.conv_bias.N.…"); the unsqueezes of an input are views the
//   lowering resolves without a step (stages.cpp), so the bias stays the task's own
//   tensor.

#include "coder/task_graph.hpp"

namespace ks::rules {

task_graph split_conv_bias(const task_graph& graph);

}  // namespace ks::rules
