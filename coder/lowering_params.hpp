#pragma once
// The knobs of the rules coder's templates (lowering_params), and the six that take
// one of a few named values as enums with one name table each: a recipe's text is
// read and written through that table (to_recipe / from_recipe in lowering.hpp), and
// an error names the bad value and the names it expected.
//
// What it promises:
// - each enum's names are its table's, in the table's order; parse_param(name_of(v))
//   is v for every value;
// - only append values: a recipe stores names, never numbers.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ks {

namespace param {
enum class row_mapping { block, warp };
enum class row_cache { none, registers, shared, on_chip };
enum class cache_hint { none, streaming, readonly };
enum class moments { shifted, welford };
enum class conv_layout { nchw, channels_last };
enum class gemm_precision { fp32, split_tf32 };

// The name table of each enum: names[v] for value v.
template <class E>
struct names;
template <>
struct names<row_mapping> {
  static constexpr std::array<std::string_view, 2> all = {"block", "warp"};
};
template <>
struct names<row_cache> {
  static constexpr std::array<std::string_view, 4> all = {"none", "registers", "shared", "on_chip"};
};
template <>
struct names<cache_hint> {
  static constexpr std::array<std::string_view, 3> all = {"none", "streaming", "readonly"};
};
template <>
struct names<moments> {
  static constexpr std::array<std::string_view, 2> all = {"shifted", "welford"};
};
template <>
struct names<conv_layout> {
  static constexpr std::array<std::string_view, 2> all = {"nchw", "channels_last"};
};
template <>
struct names<gemm_precision> {
  static constexpr std::array<std::string_view, 2> all = {"fp32", "split_tf32"};
};

template <class E>
std::string name_of(E v) {
  return std::string(names<E>::all.at(static_cast<size_t>(v)));
}

// The value named `text`, or nothing.
template <class E>
std::optional<E> parse_param(std::string_view text) {
  for (size_t i = 0; i < names<E>::all.size(); ++i)
    if (names<E>::all[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

// The names, for an error: "none, registers, shared or on_chip".
template <class E>
std::string expected_names() {
  std::string s;
  const auto& all = names<E>::all;
  for (size_t i = 0; i < all.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i]);
  return s;
}
}  // namespace param

// The knobs of the templates; a candidate's recipe holds them as strings
// (to_recipe / from_recipe), and the optimizer's methods change them.
struct lowering_params {
  int vector_width = 4;                                        // elementwise: floats per load/store (1, 2 or 4)
  int block_size = 256;                                        // threads per block (a multiple of 32, ≤ 1024)
  int elements_per_thread = 1;                                 // elementwise: vectors per thread per loop trip (unroll)
  int grid_cap = 4096;                                         // elementwise: blocks at most (grid-stride loop)
  param::row_mapping row_mapping = param::row_mapping::block;  // row_reduce: a block per row, or a warp
  bool fast_math = false;                                      // __expf/__fdividef intrinsics where accuracy allows
  bool fuse_prologue = true;                                   // row_reduce: compute the feeding chain on load
  // row_reduce: registers (or shared memory, or a cluster's: on_chip) keep the row on
  // chip for its second read.
  param::row_cache row_cache = param::row_cache::none;
  // elementwise: streaming (__ldcs/__stcs) or readonly (__ldg).
  param::cache_hint cache_hint = param::cache_hint::none;
  // row_reduce: how many device-fulls of blocks a reduction over few long rows is
  // split into (several blocks per row, combined in a fixed order); 0: a block per row.
  int row_split = 1;
  // row_reduce: how mean and variance accumulate: shifted sums (from the row's first
  // element) or welford (Welford's update, Chan's merge). Split rows always use Welford.
  param::moments moments = param::moments::shifted;
  // library conv2d: the layout cuDNN computes in: nchw (the tensors' own) or
  // channels_last (input and weight converted first, the result handed on as
  // [N, H, W, C] and read so by the kernels after it, which store what the graph
  // returns back as NCHW, and by a network's next layers: coder/rules/passes/conv_layout.hpp).
  param::conv_layout conv_layout = param::conv_layout::nchw;
  // library float32 products: fp32 (cuBLAS's FP32 SGEMM, as eager) or split_tf32
  // (3xTF32: operands split into TF32 big and small parts, one TF32 product over 3K at
  // FP32's accuracy; only where the task's shapes make the product bound by
  // arithmetic, coder/rules/templates/split_tf32.hpp).
  param::gemm_precision gemm_precision = param::gemm_precision::fp32;
  // A sum or mean over a product's outputs as a matrix-vector product
  // (coder/rules/passes/sum_of_product.hpp). The same products summed in another order: where
  // the reference's own rounding is near the tolerance, the review can fail it, so a
  // seed without it stays (the plainest, and a failed seed's repair).
  bool matvec_sums = false;
  // Every reduction (sums, norms, softmax, ...) as an ATen library step: ATen's own
  // order of the sum, so a result whose tolerance cannot absorb another order (a sum
  // of thousands of large products that cancel, as KernelBench's 14_Gemm_Divide_Sum_
  // Scaling's) comes out as the reference's. No seed takes it; a repair does, after
  // the plainest parameters failed (rules_coder::repair).
  bool library_reductions = false;
};

}  // namespace ks
