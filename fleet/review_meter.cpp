#include "fleet/review_meter.hpp"

#include <algorithm>

namespace ks {

review_meter::review_meter(std::vector<std::string> pool_names) {
  for (auto& n : pool_names) pools_.push_back(pool_state{std::move(n)});
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
  if (p.in_flight > 0 && --p.in_flight == 0)
    p.busy_s += std::chrono::duration<double>(now - p.busy_since).count();
  recent_.push_back(now);
  // Bounded memory: an hour of answers at most.
  while (!recent_.empty() && now - recent_.front() > std::chrono::hours(1)) recent_.pop_front();
}

std::vector<review_meter::pool_reading> review_meter::read() const {
  std::lock_guard lock(mu_);
  const auto now = clock::now();
  std::vector<pool_reading> out;
  for (const auto& p : pools_) {
    double busy = p.busy_s;
    if (p.in_flight > 0) busy += std::chrono::duration<double>(now - p.busy_since).count();
    out.push_back(pool_reading{p.name, busy, p.reviews});
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
