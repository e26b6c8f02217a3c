#pragma once
// What the reviewer has done, for the daemon's metrics: per GPU pool, the seconds it
// had work (a review running or queued: a pool reviews one at a time, so this is its
// busy time), the reviews answered, the reviews lost with a node (re-queued
// elsewhere: not answered, not counted as reviews), and whether the pool is in the
// rotation. Thread-safe: the dispatcher writes, the HTTP threads read.

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace ks {

class review_meter {
 public:
  // One name per pool, in the reviewer's pool order ("local/0", "gpu-host:8471").
  explicit review_meter(std::vector<std::string> pool_names);

  // A pool found later (a node that was not reachable at start); its index.
  size_t add_pool(std::string name);

  void started(size_t pool);          // a request went to `pool`
  void finished(size_t pool);         // its answer came back
  void lost(size_t pool);             // its node went away with it (it goes to another pool)
  void refused(size_t pool);          // never sent: the pool's node was down (it goes to another pool)
  void set_up(size_t pool, bool up);  // in the rotation, or out of it

  struct pool_reading {
    std::string name;
    double busy_s = 0;
    uint64_t reviews = 0;
    uint64_t lost = 0;
    bool up = true;
  };
  std::vector<pool_reading> read() const;
  uint64_t reviews() const;
  // Answers per second over the last `window_s` seconds (or since the meter began,
  // when that is shorter).
  double reviews_per_second(double window_s = 60) const;

 private:
  using clock = std::chrono::steady_clock;
  struct pool_state {
    std::string name;
    int in_flight = 0;
    clock::time_point busy_since;
    double busy_s = 0;
    uint64_t reviews = 0;
    uint64_t lost = 0;
    bool up = true;
  };
  void end_one(pool_state& p, clock::time_point now);
  mutable std::mutex mu_;
  clock::time_point began_ = clock::now();
  std::vector<pool_state> pools_;
  std::deque<clock::time_point> recent_;  // answer times within the longest window asked
};

}  // namespace ks
