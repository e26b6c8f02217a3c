#pragma once
// The scan template: cumsum and cumprod along one dim, with the elementwise chain
// after them fused before the store, and the flips and the zero-padded shift around
// them fused into their loads and stores:
//   flip(cumsum(flip(x, d), d), d)   a reverse scan (each position's sum of those after it);
//   cumsum(narrow(cat([zeros with 1 along d, x], d), d, 0, x.size(d)), d)
//                                    an exclusive scan (each position's sum of those before it);
//   cat([zeros with 1 along d, cumsum(narrow(x, d, 0, x.size(d) - 1), d)], d)
//                                    the same exclusive scan, shifted after the scan.
//
// What it promises:
// - along the last dim, a warp per row walks tiles of 128 elements (4 consecutive
//   per lane, a warp scan of the lane totals, the running carry added), or, when rows
//   are too few for a warp each to fill the device, a block per row walks tiles of
//   4 elements a thread (a block scan); along another dim, a thread per (outer,
//   inner) position walks its column in order;
// - few long rows along the last dim (too few to fill the device, as the row-reduce
//   template decides: lowering_params::row_split, the device's SMs) are split over
//   several blocks each (reduce, then scan): a first kernel reduces each block's
//   chunk into a partial, a second gives each block the partials of the chunks before
//   its own, merged in order, and scans its chunk tile by tile (a block scan of
//   4 elements a thread); deterministic, no atomics;
// - a running sum is carried in double (within an fp32 rounding of the exact running
//   sum), a running product in float;
// - a 0-d input is an error naming the op.

#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

// What the scan template chose for one scan.
struct scan_layout {
  bool sum = true;                    // cumsum (else cumprod)
  int64_t dim = 0;                    // the scanned dim
  bool last = true;                   // the last dim: a warp per row (else a thread per position)
  int block = 256;                    // threads per block
  std::string carry_type = "double";  // the running value's type
  bool reverse_in = false;            // reads position p at C - 1 - p (a flip before the scan)
  bool reverse_out = false;           // stores position p at C - 1 - p (a flip after the scan)
  bool exclusive = false;             // reads position p at p - 1, 0 at p = 0 (a zero-padded shift)
  int64_t split = 1;                  // last dim: blocks per row at the target shapes; 1: not split
  bool block_rows = false;            // last dim: a block per row (or several, split), not a warp
};

result<scan_layout> choose_scan_layout(const lowering_context& cx, size_t si);

// Stage `si` (a scan) as its kernels and plan steps.
status emit_scan(lowering_context& cx, size_t si);

}  // namespace ks::rules
