#pragma once
// Ops that return their input's values unchanged, taken out of the graph before the
// stages are planned: a dropout that draws nothing (eval mode, or a constant p of 0:
// nn.Dropout(0.0) in training mode, as in KernelBench level 3's DenseNets after every
// convolution). Lowered as ops, each was an elementwise kernel copying a whole
// activation (level 3's 14_DenseNet121DenseBlock: six copies of a convolution's
// output, each then concatenated), where its readers can read the input itself.
//
// What it promises:
// - only aten::dropout, aten::feature_dropout and aten::alpha_dropout whose `train` is
//   a constant false or whose `p` is a constant 0 are taken out; their readers read the
//   op's input instead;
// - one whose result is an output of the graph stays (a plan writes its outputs; the
//   lowering copies the input there, as before).

#include "coder/task_graph.hpp"

namespace ks::rules {

task_graph drop_identities(const task_graph& graph);

}  // namespace ks::rules
