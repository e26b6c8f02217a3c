#pragma once
// The sending side of a module sent in parts (protocol/module_parts.hpp), for any
// receiver that takes module_part (a GPU worker, a node agent): the local pool's
// courier (fleet/gpu_pool.cpp) and the remote pool (fleet/remote_pool.cpp) use it.

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <caf/event_based_actor.hpp>

#include "protocol/protocol.hpp"

namespace ks {

// How a sending of parts ended: `link` set when the link failed under it; else
// `refused` says why the receiver refused a part, empty when every part was taken.
using parts_done = std::function<void(std::optional<caf::error> link, std::string refused)>;

// Sends `module`'s parts from `offset` on to `dest`, one at a time, each after the last
// was taken, in parts of at most part_bytes; then done().
template <class Handle>
void send_module_parts(caf::event_based_actor* self, const Handle& dest, const shared_bytes& module,
                       const std::string& digest, uint64_t offset, uint64_t part_bytes, const parts_done& done) {
  module_part part;
  part.sha256 = digest;
  part.offset = offset;
  part.total = module.size();
  part.bytes = module.slice(offset, part_bytes);
  const uint64_t next = offset + part.bytes.size();
  self->request(dest, caf::infinite, std::move(part))
      .then(
          [=](std::string& refused) {
            if (!refused.empty() || next >= module.size()) return done(std::nullopt, std::move(refused));
            send_module_parts(self, dest, module, digest, next, part_bytes, done);
          },
          [done](caf::error& err) { done(std::move(err), {}); });
}

// The review_result for a review whose module's parts the receiver refused.
inline review_result refused_module(const review_request& req, const std::string& refused) {
  return unjudged(req, "the GPU worker refused the task's module: " + refused);
}

}  // namespace ks
