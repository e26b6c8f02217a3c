#pragma once
// An elementwise chain as CUDA statements, for the kernel that computes it alone
// (elementwise.cpp) or inside another template: a reduction's prologue (on its
// loads) and epilogue (on its second pass), a pool's or a scan's epilogue (before
// the store).
//
// What it promises:
// - chain_code writes one `const float` per value, in graph order, and reads each
//   operand tensor once per element index (a parameter from kernel_params, indexed
//   through its broadcast); scalars are literals, sizes float parameters;
// - an op the chain does not take is an error naming the op and its value;
// - access indexes a broadcast operand without a division or modulo along dims where
//   it is not broadcast; in split mode (rows x columns) it reads `row` or `c` instead
//   of the flat index;
// - a value stored with padded rows (lowering_context::row_pitch, a 2-d product's
//   result) is read at `row * pitch + c` when the chain is split at its last dim, at
//   i + row * (pitch - N) where the kernel holds the row (chain_reads::pitched_row: a
//   reduction's rows), else at (i / N) * pitch + i % N;
// - a read that chain_reads::held_reads names is written as the name it gives, in
//   place of the load (with or without a cache hint) it would have been.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

// How chain_code reads tensors.
struct chain_reads {
  // "none"; "streaming" (__ldcs on full-shape operands); "readonly" (__ldg on all);
  // "readonly_broadcast" (__ldg on broadcast operands only, where the vector path
  // loads the full-shape ones itself). Elementwise kernels only.
  std::string load_hint = "none";
  // Elementwise kernels over rows x c: the first dim of c (0: a flat index).
  size_t split = 0;
  // Parts of the flat index the kernel already holds in a variable, each by the text
  // access() writes for it ("(i / n2)" -> "row", "(i % n2)" -> "c"): an operand's
  // index takes the variable instead (a reduction's rows and channels, row_reduce.hpp).
  std::map<std::string, std::string> index_names = {};
  // Tensor parameters whose element at the flat index itself the kernel already holds,
  // each with the text that holds it (a row cache's rc_in0[k]): the read is written
  // as that text instead of a load (row_cache.cpp, middle_reduce.cpp).
  std::map<std::string, std::string> held_reads = {};
  // Reductions over the last dim of a 2-d value (row_reduce.hpp's rows): the variable
  // that holds the row of flat index i = row * N + column. A value stored with padded
  // rows is then read at i + row * (pitch - N), without a division.
  std::string pitched_row = "";
};

// The runs [a, b) of dims of `iter` along which tensor shape `in` (aligned to the
// right, as broadcasting does) is not broadcast.
std::vector<std::pair<size_t, size_t>> kept_groups(const shaped& in, const shaped& iter);

// Split mode's first dim of the columns for chain `st` (over its iteration shape):
// the s where every broadcast operand is indexed by the row (dims [0, s)) alone or by
// the column with neither division nor modulo, and rows are at least 1024 elements
// long at the target size; 0 when there is none (or nothing is broadcast).
size_t choose_column_split(const lowering_context& cx, const stage& st);

// The element index of a tensor of shape `in` for flat index `i` of `iter`; a part of
// it that `names` names (chain_reads::index_names) is written as its name.
std::string access(const shaped& in, const shaped& iter, const std::string& i, kernel_params& kp, size_t split = 0,
                   const std::map<std::string, std::string>& names = {});

// The chain's statements for element index `i`, appended to `code`. `var` maps
// each value already in a variable (given, or computed here) to it; names made here
// carry `tag` so that two chains in one kernel do not collide. An op whose expression
// calls the fast-math helpers sets cx.uses_fast_math.
status chain_code(lowering_context& cx, const stage& st, const std::string& i, kernel_params& kp, std::string& code,
                  std::map<std::string, std::string>& var, const std::string& tag, const chain_reads& reads = {});

// The fused epilogue of stage `si` (a pool or a scan): its chain with `value` (the
// stage's result) in the register `res`, at element index `idx`, then the stores of
// what the plan needs of it. Empty when the stage has none.
struct epilogue_code {
  std::string code;  // statements reading `res` and the index variable
  std::string stores;
};
result<epilogue_code> fused_epilogue(lowering_context& cx, size_t si, const std::string& value, const std::string& idx,
                                     kernel_params& kp);

}  // namespace ks::rules
