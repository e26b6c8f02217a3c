#pragma once
// The verifier's element-wise checks (docs/reviewer.md, "Verification"): a candidate's
// output against the reference's, two runs against each other bit for bit, and the
// poison written into buffers before a run so that elements a candidate never writes
// cannot pass. Device-agnostic ATen code: it runs where the tensors are, and the tests
// run it on CPU tensors.
//
// This header includes ATen's Tensor; keep it out of torch-free code.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/task.hpp"

namespace ks {

// How one output compares with the reference's (same shape and dtype; the caller
// checks that first).
struct output_comparison {
  bool ok = true;
  int64_t numel = 0;
  int64_t bad_count = 0;   // elements outside the tolerance
  int64_t first_bad = -1;  // flat index of the first, or -1
  double got = 0;          // the candidate's and the reference's values there
  double want = 0;
  // Over the elements where the reference is finite; NaN in the candidate counts as
  // an infinite error. Relative error is |got - want| / max(|want|, atol).
  double max_abs_error = 0;
  double max_rel_error = 0;
  // Candidate elements that are NaN or ±Inf where the reference's are finite.
  int64_t nonfinite_count = 0;
};

// Floating-point outputs: close where |got - want| <= atol + rtol * |want|, or both are
// the same infinity, or both are NaN (NaN passes only where the reference has NaN);
// computed in float32 (float64 for float64 outputs; float16 and bfloat16 are widened
// exactly). Integer and bool outputs must be equal.
//
// Both checks below go through the flat elements `chunk` at a time, so that their
// temporaries (a few float and bool tensors of that many elements, about 1 GB) stay
// bounded however large the output: level 1's convolutions write 8 GB outputs, and
// comparing them whole ran out of the memory a GPU shared with torch.compile's
// warm-ups left. The answer is the same for any chunk.
inline constexpr int64_t kCompareChunk = int64_t{1} << 26;
output_comparison compare_output(const at::Tensor& got, const at::Tensor& want, const tolerance_spec& tol,
                                 int64_t chunk = kCompareChunk);

// The flat index of the first element where `a` and `b` differ bit for bit (so NaN
// equals NaN of the same payload, and -0.0 differs from 0.0), or -1 when they are
// identical. 0 when their shapes or dtypes differ.
int64_t first_bitwise_difference(const at::Tensor& a, const at::Tensor& b, int64_t chunk = kCompareChunk);

// A checksum of `t`'s bits: its bytes as 32-bit words (bytes where the size is not a
// multiple of 4) summed into a wrapping 64-bit integer, on `t`'s device. Any change of
// one element changes it; it guards the reviewer's cached trial data against a
// candidate that writes outside its own buffers. 0 for an empty tensor.
int64_t bit_fingerprint(const at::Tensor& t);

// Poison patterns, written into outputs and scratch before each of a candidate's
// runs: pattern 0 (the first run of every trial) writes NaN (floats), 0x7F7F7F7F…
// (integers) or true (bool); pattern 1 (the second run of even trials) writes the
// finite -2^100 (float16: -32768), 0xA5A5A5A5… or false; pattern 2 (the second run
// of odd trials) +2^100 (float16: +32768), 0x5A5A5A5A… or false. An element a
// candidate never writes then fails the comparison (NaN), and a value it computes
// from memory nothing wrote differs between the two runs — even through fmaxf or
// fminf, which drop NaN (the sign of the finite poison alternates between trials).
void poison(at::Tensor& t, int pattern);
// The value `pattern` writes into a tensor of `t`'s dtype, as a double (to recognise it).
double poison_value(const at::Tensor& t, int pattern);

// Element `flat` of a contiguous-or-not tensor, as a double (for messages).
double element_at(const at::Tensor& t, int64_t flat);

// "[3, 17]": the multi-index of flat index `flat` in `shape` (row-major).
std::string index_string(const std::vector<int64_t>& shape, int64_t flat);

// "float32", "int64", … (the plan's names).
std::string dtype_name(const at::Tensor& t);

}  // namespace ks
