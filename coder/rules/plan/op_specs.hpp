#pragma once
// What a reducing or pooling node says once read (its dims, its constants); which
// class each op is in is op_table.hpp's table.
//
// What it promises:
// - a reduction_spec or pool_spec is all a template needs of its node: the readers
//   (op_specs.cpp) check the node once, and the templates trust the spec.

#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/plan/op_table.hpp"

namespace ks::rules {

int64_t normalize_dim(int64_t d, size_t rank);

// How a reduction accumulates: one running value (sum, max, min), the online
// max-and-sum of the exponentials (logsumexp, softmax), or moments (var, std,
// layer_norm): shifted sums, or Welford's count, mean and M2 (the row-reduce
// template picks welford for split rows or when the params say so).
// arg: the best value and its index (argmax, argmin), the index carried as an int's
// bits in a float state variable (shuffles and shared memory move bits exactly).
enum class acc_kind { sum, max, min, online, moments, welford, arg };

// A reduction read from its node.
struct reduction_spec {
  std::string op;  // sum mean max min argmax argmin lse var std norm1 norm2 softmax log_softmax layer_norm group_norm
                   // instance_norm batch_norm
  acc_kind acc = acc_kind::sum;
  std::string input;            // value id
  std::string output;           // value id
  int64_t first = 0, last = 0;  // reduced dims [first, last)
  bool keepdim = false;
  double correction = 1;     // var/std
  double eps = 1e-5;         // layer_norm, group_norm, instance_norm, batch_norm
  std::string weight, bias;  // the norms' affine (value ids, or empty)
  // group_norm: the number of groups; a row is one (batch, group) pair, its channels
  // and their spatial dims contiguous. 0 for every other op.
  int64_t groups = 0;
  // instance_norm and batch_norm: a row is one (batch, channel) pair; weight and bias
  // are per channel.
  bool channel_affine = false;
  // batch_norm (the batch's statistics): a channel's mean and variance are those of
  // its rows in every batch, so the rows' partial states are merged across the batch
  // (always the split rows' two kernels, row_split.hpp), and the variance divides by
  // the merged count.
  bool batch_stats = false;
  bool normalizes() const {
    return op == "softmax" || op == "log_softmax" || op == "layer_norm" || op == "group_norm" ||
           op == "instance_norm" || op == "batch_norm";
  }
  // The norms built on mean and variance.
  bool moment_norm() const {
    return op == "layer_norm" || op == "group_norm" || op == "instance_norm" || op == "batch_norm";
  }
  // The C type its kernel writes: argmax/argmin's int64 indices, float32 otherwise.
  const char* out_ctype() const { return acc == acc_kind::arg ? "long long" : "float"; }
};

// A 1-, 2- or 3-d pool read from its node: the window over the last `dims` dims,
// entries [0, dims) of each array (the first of them the outermost).
struct pool_spec {
  bool max = true;
  int dims = 2;
  int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  bool count_include_pad = true;
  double divisor = 0;  // divisor_override, 0 = none
};

// Whether normalisation `n` (aten::group_norm, instance_norm, batch_norm, in place or
// not) normalises by its input's own statistics: group_norm always, instance_norm with
// use_input_stats, batch_norm in training mode (as KernelBench runs it) or without
// running statistics. False for every other node. The rules coder's templates take
// only these (on running statistics a norm is an elementwise affine map), and a chain
// of them is what deep_normalisation_chain counts.
bool on_batch_statistics(const task_graph& g, const graph_node& n);

// Whether `g` has at least kDeepNormalisations normalisations on the batch's own
// statistics: a network whose templates' sums, in another order than the reference's,
// miss a tight tolerance (rules_coder seeds it with ATen's NCHW reductions first).
inline constexpr int kDeepNormalisations = 3;
bool deep_normalisation_chain(const task_graph& g);

// The reduction `n` (of op `kind`, without its in-place underscore) computes; an
// error names what the template does not take (non-adjacent dims, max's indices
// used, a norm of another order).
result<reduction_spec> read_reduction(const lowering_context& cx, const graph_node& n, const std::string& kind);
// The pool `n` computes; an error for ceil_mode or indices.
result<pool_spec> read_pool(const lowering_context& cx, const graph_node& n, const std::string& kind);

}  // namespace ks::rules
