#pragma once
// The CUDA names the source analysis recognises by name: transcendental and fast-math
// functions, warp shuffles, atomics, cache-hinted loads and stores.
//
// What it promises: each predicate looks at the name only (a qualified name such as
// cg::reduce or ::atomicAdd is reduced to its last part where that matters).

#include <set>
#include <string>

namespace ks::features::analysis {

// Calls counted by transcendental_count.
const std::set<std::string>& transcendental_names();
// Calls that make uses_fast_math_intrinsics.
const std::set<std::string>& fast_math_names();
bool is_shuffle(const std::string& n);
// __shfl_xor/down/up: accumulation across lanes.
bool is_reducing_shuffle(const std::string& n);
// atomicAdd, atomicMax, ... (a capital letter after "atomic").
bool is_atomic(const std::string& n);
// An atomic other than an exchange.
bool is_accumulating_atomic(const std::string& n);
// The last part of a qualified name: "wmma::mma_sync" → "mma_sync".
std::string last_name(const std::string& n);
// __ldg and the other cache-hinted loads.
bool is_ldg(const std::string& n);
// __stcg and the other cache-hinted stores.
bool is_st_hint(const std::string& n);
// __reduce_add_sync and the other warp reduce intrinsics.
bool is_reduce_sync_intrinsic(const std::string& n);
// __syncthreads and its _count/_and/_or forms.
bool is_syncthreads(const std::string& n);
// Names that mean tensor cores: wmma, mma_sync, wgmma, __hmma_*.
bool names_tensor_cores(const std::string& n);
// Paired-half intrinsics (__hadd2, __hfma2, __floats2half2_rn, ...): vector types.
bool is_half2_intrinsic(const std::string& n);
// Inline asm with mma.sync, wgmma or wmma instructions.
bool asm_uses_tensor_cores(const std::string& text);
// Inline asm with .approx instructions.
bool asm_uses_approx_math(const std::string& text);

}  // namespace ks::features::analysis
