#pragma once
// A traced convolution under its own name. torch.jit.trace records nn.Conv2d and
// nn.ConvTranspose2d as aten::_convolution, the op they all call (KernelBench level 2's
// 10_ and 16_, whose Hardtanh takes integer bounds that torch.jit.script refuses, are
// imported so): no template takes it, and the passes that read a convolution by name
// (conv_layout.hpp) did not see it. Here each becomes the op a scripted module records:
//
//   _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups,
//                benchmark, deterministic, cudnn_enabled, allow_tf32)
//   -> conv{1,2,3}d(x, w, b, stride, padding, dilation, groups)
//   -> conv_transpose{1,2,3}d(x, w, b, stride, padding, output_padding, groups, dilation)
//
// What it promises:
// - only a node whose `transposed` is a constant and whose flags are the defaults the
//   named op runs with (benchmark, deterministic false; cudnn_enabled, allow_tf32 true)
//   is renamed, and only where input and weight have the same rank (3 to 5); the
//   renamed op computes what _convolution computes with those flags;
// - the node keeps its values; its schema is ATen's for the named overload.

#include "coder/task_graph.hpp"

namespace ks::rules {

task_graph name_convolutions(const task_graph& graph);

}  // namespace ks::rules
