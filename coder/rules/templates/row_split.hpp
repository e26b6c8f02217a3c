#pragma once
// Few long rows split over several blocks each: the row-reduce template's answer to
// a reduction whose rows are too few to fill the GPU (16 rows of 4M elements are 16
// blocks on 132 SMs with a block per row).
//
// Two kernels. The first (NAME_part) gives each row SPLIT blocks; block b reduces its
// chunk [b * chunk, min(C, (b + 1) * chunk)) (chunk a multiple of 4, so that float4
// reads stay aligned) into a partial state in scratch. The second merges a row's
// SPLIT partials in the order of b, then either stores the reduced value (a warp per
// row) or, for a normalisation or a fused epilogue, runs the second pass: each of the
// row's SPLIT blocks merges the same partials in the same order (so every block of a
// row holds the same bits) and walks its own chunk again. batch_norm's rows are
// (batch, channel) pairs whose statistics are the channel's: it always takes these two
// kernels (SPLIT may be 1), and its second kernel merges the partials of the row's
// channel in every batch, batch by batch and part by part.
//
// What it promises:
// - choose_split decides from the params (row_split: how many device-fulls of blocks
//   to aim at; 0 never splits), the device (SMs, threads an SM holds) and the rows at
//   the target shapes; SPLIT itself is a plan expression over the run's shapes, so
//   the same candidate serves every size (SPLIT may be 1 there);
// - deterministic: no atomics, every merge in a fixed order: the same input gives the
//   same bits on every run;
// - mean and variance use Welford's update and Chan's merge (acc_kind::welford).

#include <cstdint>

#include "base/result.hpp"
#include "coder/lowering.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

struct reduce_parts;
struct reduce_layout;

// Blocks per row at the target shapes for a reduction over rows (rp's row_len and
// rows_n): 1 when a block per row already fills the device or rows are short.
int64_t choose_split(const lowering_params& p, const lowering_device& dev, const reduce_parts& rp);
// The same for `rows` rows of `len` elements (the scan template's split too).
int64_t split_blocks(const lowering_params& p, const lowering_device& dev, int64_t rows, int64_t len);
// Blocks of p.block_size that fill the device row_split times (0 when row_split is 0).
int64_t blocks_wanted(const lowering_params& p, const lowering_device& dev);
// SPLIT as a plan expression over the run's `rows` and row length `len`: as many
// blocks a row as fill the device, no chunk under 16 elements a thread.
std::string split_expression(const lowering_params& p, const lowering_device& dev, const std::string& rows,
                             const std::string& len);

// Stage `si`'s reduction over split rows: its two kernels, plan steps, the SPLIT
// constant and the partials' scratch.
status emit_split_rows(lowering_context& cx, size_t si, reduce_parts& rp, const reduce_layout& lay);

}  // namespace ks::rules
