#pragma once
// The reduction combine helpers: a reduction's running state as CUDA text (its
// variables, their identities, the update by one element `v`), the merge of two
// states, the warp and block combines, and the reduced value from the combined
// state. The row-reduce template (row_reduce.cpp, row_cache.cpp) writes its loops
// around these.
//
// What it promises:
// - a combine leaves every lane (warp_combine) or every thread (block_combine) with
//   the whole state; block_combine needs only blockDim.x a multiple of 32;
// - merges are deterministic: the same states in the same order give the same bits
//   (no atomics).

#include <string>
#include <vector>

#include "coder/rules/plan/op_specs.hpp"

namespace ks::rules {

struct acc_text {
  std::vector<std::string> state;
  std::vector<std::string> identity;
  std::string update;  // reads `v`
};

// The state's names carry `suffix` (a2 for a: a second reduction in the same kernel,
// twin_rows.hpp); every text below writes the names the acc_text it is given holds.
acc_text acc_of(const reduction_spec& r, const std::string& suffix = "");
// The state's declarations with their identities, one a line.
std::string declare_state(const acc_text& a);
// The device helper Welford states merge with (ks_wf_merge): prepended once to a
// source whose kernels use acc_kind::welford (lowering_context::uses_welford).
std::string welford_helpers();
// The statement that merges the state variables `other` (in the order of
// acc_text::state) into the state `a`.
std::string merge(const reduction_spec& r, const acc_text& a, const std::vector<std::string>& other);
// Warp-level combine of the state; every lane ends with the warp's result (with
// `lanes` < 32: the result of its aligned group of that many lanes).
std::string warp_combine(const reduction_spec& r, const acc_text& a, int lanes = 32);
// Block-level combine through one float per warp and state variable.
std::string block_combine(const reduction_spec& r, const acc_text& a);
// The value of a reducing op from the combined state `a`; `count` is the number of
// elements reduced.
std::string finish(const reduction_spec& r, const acc_text& a, const std::string& count);

}  // namespace ks::rules
