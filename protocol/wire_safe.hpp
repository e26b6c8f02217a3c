#pragma once
// Making messages safe to send. CAF 0.17 serializes a double with detail::pack754,
// which loops forever on an infinity (it halves the value until it is below 2): a
// worker that replied with max_abs_error = inf hung in its reply, and the pool timed
// the review out (found on the H200 with a kernel that left one output unwritten).
// Every double that crosses a process boundary must therefore be finite. A NaN does
// not hang but arrives as garbage, so it is replaced too.
//
// A message must also fit: CAF 0.17's BASP header gives a message's payload a 32-bit
// length, and a link that is sent more drops (level 2's 55, 56 and 59 carry 4.3 GB of
// weights: each review lost its worker three times).

#include <cstdint>
#include <string>

#include "model/review.hpp"
#include "protocol/requests.hpp"

namespace ks {

// A finite stand-in: ±inf → ±DBL_MAX; NaN → +DBL_MAX (every double the protocol
// carries is an error, a time, a ratio or a measurement, for which "huge" is the
// honest reading of "not a number").
double wire_safe(double v);

// review_result with every double finite; profile metrics that are not finite are
// removed (an absent metric is unknown to the policy, never a made-up number).
void make_wire_safe(review_result& r);

// The largest module a review request may carry: 4 GiB less 64 MiB for the rest.
inline constexpr uint64_t kMaxWireModuleBytes = (uint64_t{4} << 30) - (uint64_t{64} << 20);

// Why `req` cannot be sent as one message (its task's module is larger than `limit`),
// in words; empty when it can.
std::string too_large_to_send(const review_request& req, uint64_t limit = kMaxWireModuleBytes);

}  // namespace ks
