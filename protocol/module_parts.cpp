#include "protocol/module_parts.hpp"

#include <utility>

namespace ks {

std::string module_not_held(const std::string& sha256) {
  return "the GPU worker does not hold the task's module (sha256 " + sha256 + "): send its parts again";
}

held_review hold_module(const review_request& r) {
  held_review h;
  h.module_sha256 = r.task.module_bytes.sha256_hex();
  h.request = r;
  h.request.task.module_bytes.clear();
  return h;
}

std::string module_store::add(module_part part) {
  auto done = held_.find(part.sha256);
  if (done != held_.end()) {
    // Sent again (the sender lost track, say): the module is held already.
    if (part.offset + part.bytes.size() >= part.total) find(part.sha256);
    return {};
  }
  std::string& so_far = assembling_[part.sha256];
  // A first part starts the module over: a sender whose link dropped mid-way (a node's
  // agent outlives the daemon's link to it) sends it again from the start.
  if (part.offset == 0) so_far.clear();
  auto refuse = [&](std::string why) {
    assembling_.erase(part.sha256);
    return "module part at offset " + std::to_string(part.offset) + " of module " + part.sha256 + ": " + why;
  };
  if (part.offset != so_far.size())
    return refuse("expected the part at offset " + std::to_string(so_far.size()) + " (parts arrive in order)");
  if (part.offset + part.bytes.size() > part.total)
    return refuse("it ends at " + std::to_string(part.offset + part.bytes.size()) + ", past the module's " +
                  std::to_string(part.total) + " bytes");
  if (part.offset == 0) so_far.reserve(part.total);
  so_far.append(part.bytes.view());
  if (so_far.size() < part.total) return {};
  shared_bytes whole(std::move(so_far));
  assembling_.erase(part.sha256);
  if (whole.sha256_hex() != part.sha256)
    return "module " + part.sha256 + ": its " + std::to_string(part.total) + " bytes arrived with sha256 " +
           whole.sha256_hex();
  keep(part.sha256, std::move(whole));
  return {};
}

void module_store::keep(const std::string& sha256, shared_bytes bytes) {
  recency_.push_front(sha256);
  held_bytes_ += bytes.size();
  held_[sha256] = {std::move(bytes), recency_.begin()};
  // Drop the least recently used while over the budget, never the one just kept.
  while (held_bytes_ > keep_bytes_ && held_.size() > 1) {
    auto victim = held_.find(recency_.back());
    held_bytes_ -= victim->second.first.size();
    held_.erase(victim);
    recency_.pop_back();
  }
}

std::optional<shared_bytes> module_store::find(const std::string& sha256) {
  auto it = held_.find(sha256);
  if (it == held_.end()) return std::nullopt;
  recency_.splice(recency_.begin(), recency_, it->second.second);
  return it->second.first;
}

std::optional<review_request> module_store::resolve(const held_review& h) {
  auto bytes = find(h.module_sha256);
  if (!bytes) return std::nullopt;
  review_request r = h.request;
  r.task.module_bytes = *bytes;
  return r;
}

}  // namespace ks
