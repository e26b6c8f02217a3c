#ifndef KS_GPU_RESULT_ADOPTION_HPP
#define KS_GPU_RESULT_ADOPTION_HPP
// A library step's result taken as the plan's declared buffer itself, instead of being
// copied into the buffer allocated for it. The copy cost a full pass over the output:
// 2 ms of a 6 ms call on a 4 GiB matmul result (KernelBench level 1's small-K and
// tall-skinny products), 0.031 ms on a 64 MiB one. Two programs take results this way:
// the reviewer's plan runner (gpu/reviewer.cpp) and the launcher of an exported module
// (export/ embeds this file's text in the module it writes), so a module runs its steps
// as its review did.
//
// What it promises: `adoptable` is true only when the result can stand for the buffer
// everywhere the plan uses it afterwards: same sizes, dtype and device, row-major
// contiguous (as every declared buffer is, and as kernels index it), and sharing no
// memory with any tensor the plan can still read or write (its inputs and parameters,
// its other buffers and intermediates, the op's other results). A result that is a view
// of an input (a reshape, a contiguous() that had nothing to do) is copied, as before:
// adopting it would let a later kernel write the input, or return an alias of it to the
// caller.
//
// `live` need only hold the op's tensor arguments: an ATen op's result is either memory
// it allocated (no live tensor can hold that: each keeps its own storage alive) or a
// view of one of its arguments. Both callers pass exactly those (never the whole
// environment: on a 700-tensor network that walk cost more than the steps themselves).
//
// ATen only; C++17; include guards rather than #pragma once (the text is pasted into
// the module's main source file).

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ks {
namespace result_adoption {

// Whether the memory behind `a` and `b` overlaps (their whole storages: conservative,
// a view anywhere in a storage counts).
inline bool shares_memory(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || !a.has_storage() || !b.has_storage()) return false;
  const auto* pa = static_cast<const char*>(a.storage().data_ptr().get());
  const auto* pb = static_cast<const char*>(b.storage().data_ptr().get());
  const size_t na = a.storage().nbytes(), nb = b.storage().nbytes();
  if (pa == nullptr || pb == nullptr || na == 0 || nb == 0) return false;
  return pa < pb + nb && pb < pa + na;
}

// Whether results[k] may become the declared buffer `dst` (above). `live`: the tensors
// in scope besides dst and the results.
inline bool adoptable(const std::vector<at::Tensor>& results, size_t k, const at::Tensor& dst,
                      const std::vector<const at::Tensor*>& live) {
  const at::Tensor& r = results[k];
  if (!r.defined() || !dst.defined() || !r.has_storage()) return false;
  if (r.sizes() != dst.sizes() || r.scalar_type() != dst.scalar_type() || r.device() != dst.device()) return false;
  if (!r.is_contiguous()) return false;
  for (size_t j = 0; j < results.size(); ++j)
    if (j != k && shares_memory(r, results[j])) return false;
  for (const at::Tensor* t : live)
    if (t != nullptr && shares_memory(r, *t)) return false;
  return true;
}

}  // namespace result_adoption
}  // namespace ks

#endif  // KS_GPU_RESULT_ADOPTION_HPP
