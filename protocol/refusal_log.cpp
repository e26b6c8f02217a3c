#include "protocol/refusal_log.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ks {

refusal_log::refusal_log(std::chrono::milliseconds interval, size_t max_lines,
                         std::function<void(const std::string&)> write, size_t max_peers)
    : interval_(interval), max_lines_(max_lines), max_peers_(max_peers), write_(std::move(write)) {}

void refusal_log::set_interval(std::chrono::milliseconds interval) {
  std::lock_guard lock(mu_);
  interval_ = interval;
}

std::string refusal_log::summary() const {
  uint64_t total = others_;
  std::vector<std::pair<uint64_t, std::string>> by_count;
  for (const auto& [address, n] : seen_) {
    if (n == 0) continue;
    total += n;
    by_count.emplace_back(n, address);
  }
  if (total == 0) return "";
  std::sort(by_count.rbegin(), by_count.rend());
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", static_cast<double>(interval_.count()) / 1000);
  std::string line = "refused " + std::to_string(total) + " more connection(s) in the last " + secs + " s, not logged:";
  for (size_t i = 0; i < by_count.size() && i < 10; ++i)
    line += (i ? ", " : " ") + by_count[i].second + " " + std::to_string(by_count[i].first);
  if (by_count.size() > 10) line += ", and " + std::to_string(by_count.size() - 10) + " more address(es)";
  if (others_ > 0) line += ", " + std::to_string(others_) + " from addresses not told apart";
  return line;
}

void refusal_log::refused(const std::string& address, const std::string& peer, const std::string& why) {
  std::string before, line;
  {
    std::lock_guard lock(mu_);
    const auto now = clock::now();
    if (began_ == clock::time_point{} || now - began_ >= interval_) {
      before = summary();
      began_ = now;
      lines_ = 0;
      seen_.clear();
      others_ = 0;
    }
    auto it = seen_.find(address);
    if (it == seen_.end() && seen_.size() >= max_peers_) {
      ++others_;
    } else if (it != seen_.end() || lines_ >= max_lines_) {
      ++seen_[address];
    } else {
      seen_.emplace(address, 0);
      ++lines_;
      line = "refused " + peer + ": " + why;
    }
  }
  if (!before.empty()) write_(before);
  if (!line.empty()) write_(line);
}

}  // namespace ks
