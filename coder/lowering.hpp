#pragma once
// Lowering: a task's graph (coder/task_graph.hpp) into a candidate's CUDA source and
// launch plan, from a small library of templates:
//   elementwise   — a chain of elementwise ops (unary, binary with broadcasting,
//                   scalars, clamps, activations) fused into one kernel;
//   row_reduce    — sum/mean/amax/amin/logsumexp/var/std/norm and the normalisations
//                   built on them (softmax, log_softmax, layer_norm), with the
//                   elementwise chain that feeds them fused in as a prologue;
//   library       — matmul/mm/bmm/addmm/linear/conv2d as ATen library steps; the
//                   elementwise ops after them become one fused epilogue kernel;
//   fallback      — any other ATen op (or a variant the templates refuse) as a library
//                   step that calls it through ATen's dispatcher by its schema, with
//                   the chains before and after it still fused kernels.
// Every size in the plan is an expression over the input shapes, so one candidate
// serves every size of the task; the graph's own shapes (from one CPU run at some
// size) only decide structure (rank, which dims broadcast).
//
// What cannot run even as a library step (no ATen schema, a scalar argument computed
// at run time) is an error that names the op.
//
// Inside: coder/rules/ (lowering_context.hpp maps which file holds which template).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "coder/lowering_params.hpp"
#include "coder/search_space.hpp"
#include "coder/task_graph.hpp"
#include "model/launch_plan.hpp"

namespace ks {

// What the lowering knows of the GPU it writes for: the split of few long rows aims
// at filling every SM. Defaults are an H200's.
struct lowering_device {
  int multiprocessors = 132;
  int max_threads_per_sm = 2048;
  // Compute capability major: thread-block clusters and their distributed shared
  // memory need 9 (Hopper) or later; below it no kernel is written with them.
  int cc_major = 9;
  // The most shared memory one block may opt into (bytes): what a row spread over a
  // cluster may stage a block.
  int64_t shared_per_block_optin = 232448;
  // Shared memory per SM (bytes): how many such blocks an SM holds.
  int64_t shared_per_sm = 233472;
};

std::map<std::string, std::string> to_recipe(const lowering_params& p);
// Unknown keys are ignored (a recipe may carry `template`, `excluded`, ...); a
// malformed value is an error naming the key.
result<lowering_params> from_recipe(const std::map<std::string, std::string>& recipe);

struct lowered_kernel_set {
  std::string source;
  launch_plan plan;
  std::vector<std::string> compile_options;
  // The main template: elementwise, row_reduce, library or mixed (several kinds).
  std::string template_name;
  // The templates used, one per stage, e.g. {"library:aten::matmul", "elementwise"};
  // "fallback:aten::sort" for an op no template takes, run as a library step.
  std::vector<std::string> stages;
  // Each fallback op and why no template takes it ("aten::sort: op aten::sort (value
  // 5) is not supported by the rules coder").
  std::vector<std::string> fallback;
  // The longest row a row reduction walks, at the target shapes (0: none): a warp per
  // row of thousands of elements is a poor seed, which the generator skips.
  int64_t longest_row = 0;
  // What was rewritten beyond the templates' own choices, one line per stage
  // ("aten::linear: 3xTF32 (...)"): a candidate's origin says it.
  std::vector<std::string> rewrites;
  // How many products run split-precision (gemm_precision split_tf32 applied).
  int split_products = 0;
  // How many sums over a product's outputs became matrix-vector products.
  int matvec_sums = 0;
  // How many convolutions run channels-last with their readers in NHWC order.
  int nhwc_convolutions = 0;
  // The parameters its templates read and their legal values at the target shapes
  // (each template's, from the template table, and the lowering's own: fast_math,
  // fuse_prologue, conv_layout, matvec_sums).
  search_space space;
};

// The tensor shapes a task's kernels are tuned for (its default size): name → shape.
// The graph itself comes from a small CPU run; choices that depend on real sizes (how
// much of a row stays in registers) read these instead.
using target_shapes = std::map<std::string, std::vector<int64_t>>;

// Lowers `graph` with `params`, tuned for `target` (the graph's own shapes when empty
// or when a size cannot be evaluated). Errors name the op (and its value) that neither
// a template nor a library step covers.
result<lowered_kernel_set> lower_graph(const task_graph& graph, const lowering_params& params,
                                       const target_shapes& target = {}, const lowering_device& device = {});

}  // namespace ks
