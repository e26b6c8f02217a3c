#pragma once
// The device helpers the generated sources carry, as text: the .cuh files in
// coder/rules/cuda/, embedded into ks_coder_rules at build time (coder/CMakeLists.txt,
// through cmake/embed_file.cmake). They are real CUDA files: an editor and NVRTC read
// them as they are (tests/device_helpers_test compiles each on its own), and the
// lowering puts each in front of a source only where a kernel calls it.
//
// What it promises: each function returns its file's bytes exactly (the golden
// lowering snapshots hold them), valid for the life of the program. A comment added
// to a file is a comment in every source that carries it: say why in the C++ that
// includes it instead.

#include <string_view>

namespace ks::rules::cuda {

// KS_INF, and the merge of two online max-and-sum states (softmax, logsumexp); reads
// KS_EXP, so it follows one of the two below. In front of every source.
std::string_view common_cuh();
// KS_EXP and KS_DIV as the intrinsics __expf and __fdividef (lowering param fast_math,
// where a kernel calls them) ...
std::string_view fast_math_cuh();
// ... or as expf and IEEE division (every other source).
std::string_view precise_math_cuh();
// Chan's merge of two Welford states (count, mean, M2).
std::string_view welford_cuh();
// Dynamic shared memory and the copies into it (cp.async from sm_80 on).
std::string_view shared_rows_cuh();
// A thread-block cluster's barriers and distributed shared memory (sm_90 on).
std::string_view cluster_cuh();
// An element's nearest TF32 value, for 3xTF32 products (guarded: once a source).
std::string_view split_tf32_cuh();

}  // namespace ks::rules::cuda
