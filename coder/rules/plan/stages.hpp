#pragma once
// The graph into stages: the plan of a lowering before any template writes code.
//
// What it promises (plan_stages):
// - the graph's inputs are float32 tensors and its outputs tensors, else an error;
// - every node that makes a tensor is in exactly one stage, in graph order: a chain
//   of elementwise ops (joined while the iteration shape allows), one reduction,
//   pool, scan, library op, or fallback (an op no template takes, with why);
// - a chain is fused into a reduction as its prologue only when nothing else needs
//   its values, and after a reduction, pool or scan as its epilogue only when it
//   alone reads the stage's result (fuse_prologue off: no prologues);
// - every value another stage reads, or the graph returns, has a plan tensor
//   (tensor_of): an output, a scratch buffer, or a library step's intermediate;
// - it leaves every reduce_stage unpaired (twin and twin_of -1): pairing two plain
//   reductions over the same rows reads the row template's layout, so the driver
//   does it next (plan_twin_rows, templates/twin_rows.hpp), before any template
//   writes; the templates only read it.

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

status plan_stages(lowering_context& cx);

}  // namespace ks::rules
