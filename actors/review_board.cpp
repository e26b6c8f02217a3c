#include "actors/review_board.hpp"

#include <algorithm>

namespace ks {

review_board::claim_result review_board::claim(const std::string& id, std::chrono::milliseconds wait,
                                               const std::function<bool()>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::unique_lock lock(mu_);
  for (;;) {
    auto it = reviews_.find(id);
    if (it == reviews_.end()) {
      reviews_.emplace(id, std::nullopt);
      return {std::nullopt, true};
    }
    if (it->second) return {it->second, false};
    // Another line reviews it. Woken by its verdict or its giving up; a look at `stop`
    // every 100 ms.
    if (std::chrono::steady_clock::now() >= deadline || (stop && stop())) return {};
    cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(100),
                                                                     deadline - std::chrono::steady_clock::now()));
  }
}

void review_board::publish(const std::string& id, const review_result& r) {
  {
    std::lock_guard lock(mu_);
    if (r.status != review_status::internal_error)
      reviews_[id] = r;
    else if (auto it = reviews_.find(id); it != reviews_.end() && !it->second)
      reviews_.erase(it);
  }
  cv_.notify_all();
}

void review_board::abandon(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = reviews_.find(id); it != reviews_.end() && !it->second) reviews_.erase(it);
  }
  cv_.notify_all();
}

bool review_board::known(const std::string& id) const {
  std::lock_guard lock(mu_);
  return reviews_.count(id) > 0;
}

}  // namespace ks
