#pragma once
// Making messages safe to send. CAF 0.17 serializes a double with detail::pack754,
// which loops forever on an infinity (it halves the value until it is below 2): a
// worker that replied with max_abs_error = inf hung in its reply, and the pool timed
// the review out (found on the H200 with a kernel that left one output unwritten).
// Every double that crosses a process boundary must therefore be finite. A NaN does
// not hang but arrives as garbage, so it is replaced too.

#include <cstdint>
#include <string>

#include "model/review.hpp"

namespace ks {

// A finite stand-in: ±inf → ±DBL_MAX; NaN → +DBL_MAX (every double the protocol
// carries is an error, a time, a ratio or a measurement, for which "huge" is the
// honest reading of "not a number").
double wire_safe(double v);

// review_result with every double finite; profile metrics that are not finite are
// removed (an absent metric is unknown to the policy, never a made-up number).
void make_wire_safe(review_result& r);

}  // namespace ks
