#pragma once
// The scan template: cumsum and cumprod along one dim, with the elementwise chain
// after them fused before the store.
//
// What it promises:
// - along the last dim, a warp per row walks tiles of 128 elements (4 consecutive
//   per lane, a warp scan of the lane totals, the running carry added); along
//   another dim, a thread per (outer, inner) position walks its column in order;
// - a running sum is carried in double (within an fp32 rounding of the exact running
//   sum), a running product in float;
// - a 0-d input is an error naming the op.

#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "coder/rules/lowering_context.hpp"

namespace ks::rules {

// What the scan template chose for one scan.
struct scan_layout {
  bool sum = true;       // cumsum (else cumprod)
  int64_t dim = 0;       // the scanned dim
  bool last = true;      // the last dim: a warp per row (else a thread per position)
  int block = 256;       // threads per block
  std::string carry_type = "double";  // the running value's type
};

result<scan_layout> choose_scan_layout(const lowering_context& cx, const graph_node& n);

// Stage `si` (a scan) as one kernel and its plan step.
status emit_scan(lowering_context& cx, size_t si);

}  // namespace ks::rules
