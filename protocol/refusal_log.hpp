#pragma once
// Log lines for refused connections, bounded: a flood of refused peers (thousands of
// connections a second) wrote one warning per connection (issue 44), filling the log and
// the disk under it. What it promises, in each interval:
// - the first refusal of each peer address is logged at once, with why, up to
//   max_lines lines;
// - every other refusal is counted, and the counts go out in one line when the next
//   interval begins (at the next refusal after it ends): "refused 4,999 more connections
//   in the last 60 s, not logged: 127.0.0.1 4990, 10.0.0.7 9";
// - memory stays bounded: at most max_peers addresses are told apart in an interval
//   (more are counted together).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace ks {

class refusal_log {
 public:
  using clock = std::chrono::steady_clock;
  // `write` takes each line (a warning in the worker port's log).
  refusal_log(std::chrono::milliseconds interval, size_t max_lines, std::function<void(const std::string&)> write,
              size_t max_peers = 4096);

  // A connection from `address` (without its port) was refused; `peer` names it in the
  // line (address and port), `why` says why.
  void refused(const std::string& address, const std::string& peer, const std::string& why);

  void set_interval(std::chrono::milliseconds interval);

 private:
  std::string summary() const;  // under mu_: the line for what was not logged

  std::mutex mu_;
  std::chrono::milliseconds interval_;
  const size_t max_lines_, max_peers_;
  std::function<void(const std::string&)> write_;
  clock::time_point began_{};
  size_t lines_ = 0;                      // logged in this interval
  std::map<std::string, uint64_t> seen_;  // address → refusals not logged this interval
  uint64_t others_ = 0;                   // not logged, from addresses past max_peers
};

}  // namespace ks
