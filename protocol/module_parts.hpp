#pragma once
// A task's module sent once per receiver, in parts, instead of inside every review.
//
// CAF 0.17's BASP header gives a message's payload a 32-bit length: a review request
// whose task carries a module of 4 GiB or more cannot be sent at all (level 2's 55, 56
// and 59 carry 4.3 GB, level 3's 2_ShallowWideMLP 8.6 GB), and below that every review
// of a large module copied it across the link again and hashed it again on the other
// side. So the sender (the GPU pool's courier, fleet/gpu_pool.cpp) sends a module larger
// than one part as module_part messages, in order, each acknowledged, then the review
// itself as a held_review: the request with its module left out and the module's
// SHA-256 in its place. The receiver (the GPU worker, gpu/worker.cpp) keeps the modules
// it was sent in a module_store, by digest, and answers a held_review of a module it no
// longer holds with module_not_held(), on which the sender sends the parts again.

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>

#include "base/shared_bytes.hpp"
#include "model/fields.hpp"
#include "model/review.hpp"
#include "protocol/requests.hpp"

namespace ks {

// A part larger than this is never sent (and a module of at most this size travels
// inside its review, as before): well under the 4 GiB a message carries.
inline constexpr uint64_t kModulePartBytes = uint64_t{256} << 20;
static_assert(kModulePartBytes + (uint64_t{64} << 20) < (uint64_t{1} << 32), "a part and its header fit a message");

// Bytes [offset, offset + bytes.size()) of the module whose SHA-256 (hex) is `sha256`
// and whose size is `total`. Parts arrive in order, the first at offset 0.
struct module_part {
  std::string sha256;
  uint64_t offset = 0;
  uint64_t total = 0;
  shared_bytes bytes;
  friend bool operator==(const module_part&, const module_part&) = default;
};
template <class F>
auto visit_fields(module_part& x, F&& f) {
  return f("module_part", KS_FIELD(sha256), KS_FIELD(offset), KS_FIELD(total), KS_FIELD(bytes));
}

// A review of a task whose module the receiver was sent as parts: request.task's
// module_bytes are empty, module_sha256 names them.
struct held_review {
  std::string module_sha256;
  review_request request;
  friend bool operator==(const held_review&, const held_review&) = default;
};
template <class F>
auto visit_fields(held_review& x, F&& f) {
  return f("held_review", KS_FIELD(module_sha256), KS_FIELD(request));
}

// The message of the internal_error review_result a receiver answers a held_review
// with when it does not hold the module (never sent, or dropped to make room).
std::string module_not_held(const std::string& sha256);

// The review request `r` as sent after its module's parts: the module left out (the
// copy shares nothing large).
held_review hold_module(const review_request& r);

// The receiver's modules, by digest, assembled from their parts. Keeps at most
// keep_bytes of finished modules (the least recently used dropped first), but always
// the last one finished or used, whatever its size. Not thread-safe: one actor owns it.
class module_store {
 public:
  explicit module_store(uint64_t keep_bytes) : keep_bytes_(keep_bytes) {}

  // Takes one part. Returns why it was refused (a part out of order, one past the
  // module's size, bytes whose digest is not `sha256`), in words; empty when it was
  // taken. A refused part drops what was assembled of its module, and a part at offset
  // 0 starts it over (a sender whose link dropped mid-way sends it again from there).
  std::string add(module_part part);

  // The module with this digest, when it is held (it becomes the most recently used).
  std::optional<shared_bytes> find(const std::string& sha256);

  // `h`'s request with its module put back; nullopt when the module is not held.
  std::optional<review_request> resolve(const held_review& h);

  // review(`h`'s request with its module), or, when the module is not held, the
  // unjudged answer module_not_held(digest), on which the sender sends the parts again.
  template <class Review>
  review_result serve(const held_review& h, Review&& review) {
    auto req = resolve(h);
    return req ? review(*req) : unjudged(h.request, module_not_held(h.module_sha256));
  }

  uint64_t held_bytes() const { return held_bytes_; }
  size_t held_modules() const { return held_.size(); }

 private:
  void keep(const std::string& sha256, shared_bytes bytes);

  uint64_t keep_bytes_;
  uint64_t held_bytes_ = 0;
  std::list<std::string> recency_;  // most recent first
  std::map<std::string, std::pair<shared_bytes, std::list<std::string>::iterator>> held_;
  std::map<std::string, std::string> assembling_;  // by digest: the bytes so far
};

}  // namespace ks
