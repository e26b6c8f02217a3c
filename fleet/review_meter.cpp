#include "fleet/review_meter.hpp"

#include <algorithm>

namespace ks {

review_meter::review_meter(std::vector<std::string> pool_names) {
  for (auto& n : pool_names) pools_.push_back(pool_state{std::move(n)});
}

size_t review_meter::add_pool(std::string name) {
  std::lock_guard lock(mu_);
  pools_.push_back(pool_state{std::move(name)});
  return pools_.size() - 1;
}

void review_meter::end_one(pool_state& p, clock::time_point now) {
  if (p.in_flight > 0 && --p.in_flight == 0) p.busy_s += std::chrono::duration<double>(now - p.busy_since).count();
}

void review_meter::started(size_t pool) {
  std::lock_guard lock(mu_);
  if (pool >= pools_.size()) return;
  auto& p = pools_[pool];
  if (p.in_flight++ == 0) p.busy_since = clock::now();
}

void review_meter::finished(size_t pool) {
  std::lock_guard lock(mu_);
  if (pool >= pools_.size()) return;
  auto& p = pools_[pool];
  const auto now = clock::now();
  ++p.reviews;
  end_one(p, now);
  recent_.push_back(now);
  // Bounded memory: an hour of answers at most.
  while (!recent_.empty() && now - recent_.front() > std::chrono::hours(1)) recent_.pop_front();
}

void review_meter::lost(size_t pool) {
  std::lock_guard lock(mu_);
  if (pool >= pools_.size()) return;
  ++pools_[pool].lost;
  end_one(pools_[pool], clock::now());
}

void review_meter::refused(size_t pool) {
  std::lock_guard lock(mu_);
  if (pool < pools_.size()) end_one(pools_[pool], clock::now());
}

void review_meter::set_up(size_t pool, bool up) {
  std::lock_guard lock(mu_);
  if (pool < pools_.size()) pools_[pool].up = up;
}

std::vector<review_meter::pool_reading> review_meter::read() const {
  std::lock_guard lock(mu_);
  const auto now = clock::now();
  std::vector<pool_reading> out;
  for (const auto& p : pools_) {
    double busy = p.busy_s;
    if (p.in_flight > 0) busy += std::chrono::duration<double>(now - p.busy_since).count();
    out.push_back(pool_reading{p.name, busy, p.reviews, p.lost, p.up});
  }
  return out;
}

uint64_t review_meter::reviews() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& p : pools_) n += p.reviews;
  return n;
}

double review_meter::reviews_per_second(double window_s) const {
  std::lock_guard lock(mu_);
  const auto now = clock::now();
  const double span = std::min(window_s, std::chrono::duration<double>(now - began_).count());
  if (span <= 0) return 0;
  const auto from = now - std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(span));
  const auto n = recent_.end() - std::lower_bound(recent_.begin(), recent_.end(), from);
  return static_cast<double>(n) / span;
}

}  // namespace ks
