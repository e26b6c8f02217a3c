#pragma once
// The reviewer's trial cache: per task and trial, what verification needs again for the
// next candidate of the same task — the trial's inputs as drawn (kept pristine: the
// candidate and the reference only ever get copies) and the reference's outputs on them
// — kept in device memory within a byte budget (docs/reviewer.md, "Trial cache"). The
// reviewer stores LibTorch tensors in it; the bookkeeping here knows nothing of them, so
// tests/trial_cache_test.cpp checks it without a GPU.
//
// What it promises:
// - the entries never hold more bytes (as the caller counts them) than the budget, nor
//   than the `cap` of the put() that stored the last one;
// - eviction is least recently used across tasks: room for an entry of task T is made by
//   dropping the entries of the task used longest ago (its highest trials first), then
//   the next task's; never T's own entries, so a task whose trials do not all fit keeps
//   its first trials (trial 0 serves timing and profiling too) instead of thrashing;
// - an entry that does not fit even with every other task dropped is refused, and
//   nothing is dropped for it: the caller uses its data uncached (slower, still correct);
// - find() and put() make their task the most recently used.
//
// The sizing rules live here too, as plain arithmetic: the default budget, what one trial
// needs beside the cache, the cache's cap while a trial runs, and whether a task fits the
// device at all (an error naming the sizes instead of an out-of-memory deep in LibTorch).

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

// What one trial of a task takes in device memory, in bytes, from the shapes.
struct trial_footprint {
  uint64_t inputs = 0;      // the trial's inputs, as drawn
  uint64_t outputs = 0;     // the reference's outputs (the plan's outputs have their shapes)
  uint64_t parameters = 0;  // the task's parameters
  uint64_t scratch = 0;     // the candidate plan's declared scratch buffers
  uint64_t compare = 0;     // the output comparison's temporaries (estimate_compare_bytes)

  // What a cache entry of this trial holds: its inputs and the reference's outputs.
  uint64_t cached() const { return inputs + outputs; }
  // What a review needs beside that while it runs the trial: the candidate's copies of
  // the inputs and the reference's (on a cache miss), the candidate's outputs of its two
  // runs and its scratch, the parameters three times (the reference's own, the pristine
  // copies, the candidate's copies) and the comparison's temporaries.
  uint64_t working() const { return 2 * inputs + 2 * outputs + scratch + 3 * parameters + compare; }
};

// The temporaries compare_output makes for one output of `numel` elements of
// `element_bytes` each: it widens to float32 (float64 for float64 and integer outputs)
// and holds about four widened tensors and three masks at once.
uint64_t estimate_compare_bytes(uint64_t numel, uint64_t element_bytes);

// Device memory the reviewer never plans to fill: the CUDA context, loaded modules,
// library workspaces, the L2 flush buffer and the allocator's rounding.
inline constexpr uint64_t kDeviceReserveBytes = 2ull << 30;

// The default budget (gpus.trial_cache_gib 0): half of the device's memory. At
// KernelBench's level-1 sizes a task's 5 trials of a 6.4 GB input and a 6.4 GB output
// take 64 GB, which fits half of an H200 (~70 GiB); the other half is the review's
// working set (trial_footprint::working: ~55 GB there).
uint64_t default_trial_cache_bytes(uint64_t device_bytes);

// The most the cache may hold while a trial of `f` runs: the device's memory less the
// reserve, the working set and the trial's own data (it may be outside the cache), and at
// most `budget`; 0 when nothing is left.
uint64_t trial_cache_cap(uint64_t budget, uint64_t device_bytes, const trial_footprint& f);

// Whether one trial of `f` fits a device of `device_bytes` at all (with an empty cache).
// The error names what is needed, part by part, against the device's memory.
status check_fits_device(const trial_footprint& f, uint64_t device_bytes, const std::string& device_name);

// "6.40 GB (6400000000 bytes)".
std::string describe_bytes(uint64_t bytes);

template <class V>
class trial_cache {
 public:
  explicit trial_cache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  uint64_t budget() const { return budget_; }
  uint64_t used() const { return used_; }
  size_t size() const {
    size_t n = 0;
    for (const auto& g : groups_) n += g.trials.size();
    return n;
  }
  // Whether (task, trial) is held; does not change the order.
  bool contains(const std::string& task, uint32_t trial) const {
    for (const auto& g : groups_)
      if (g.task == task) return g.trials.count(trial) > 0;
    return false;
  }
  // The tasks held, most recently used first.
  std::vector<std::string> tasks() const {
    std::vector<std::string> out;
    for (const auto& g : groups_) out.push_back(g.task);
    return out;
  }

  // Whether put() would store an entry of `bytes` for (task, trial) (by dropping other
  // tasks' entries where needed).
  bool fits(const std::string& task, uint32_t trial, uint64_t bytes,
            uint64_t cap = std::numeric_limits<uint64_t>::max()) const {
    uint64_t own = 0;
    for (const auto& g : groups_)
      if (g.task == task)
        for (const auto& [k, e] : g.trials)
          if (k != trial) own += e.bytes;
    return own + bytes <= std::min(budget_, cap);
  }

  // Drops (task, trial) if held.
  void erase(const std::string& task, uint32_t trial) {
    auto g = group(task);
    if (g == groups_.end()) return;
    auto it = g->trials.find(trial);
    if (it == g->trials.end()) return;
    used_ -= it->second.bytes;
    g->trials.erase(it);
    if (g->trials.empty()) groups_.erase(g);
  }

  // The entry, or null. A hit makes the task the most recently used.
  V* find(const std::string& task, uint32_t trial) {
    auto g = group(task);
    if (g == groups_.end()) return nullptr;
    groups_.splice(groups_.begin(), groups_, g);
    auto it = g->trials.find(trial);
    return it == g->trials.end() ? nullptr : &it->second.value;
  }

  // Stores `value` (`bytes` of device memory) for (task, trial), replacing what was
  // there, and makes the task the most recently used. Room is made by dropping other
  // tasks' entries, least recently used task first, so that the cache holds at most
  // min(budget, cap). False, and nothing changed, when the task's other entries and this
  // one exceed that limit by themselves.
  bool put(const std::string& task, uint32_t trial, V value, uint64_t bytes,
           uint64_t cap = std::numeric_limits<uint64_t>::max()) {
    const uint64_t limit = std::min(budget_, cap);
    auto g = group(task);
    uint64_t own = 0, replaced = 0;
    if (g != groups_.end())
      for (const auto& [k, e] : g->trials) (k == trial ? replaced : own) += e.bytes;
    if (own + bytes > limit) return false;
    if (g == groups_.end()) {
      groups_.push_front(task_group{task, {}});
      g = groups_.begin();
    } else {
      groups_.splice(groups_.begin(), groups_, g);
    }
    used_ -= replaced;
    g->trials.erase(trial);
    drop_others_until(task, limit - bytes);
    g->trials.emplace(trial, entry{std::move(value), bytes});
    used_ += bytes;
    return true;
  }

  // Drops entries until the cache holds at most min(budget, cap): other tasks' first,
  // least recently used first, then `task`'s own, highest trial first. For a trial
  // whose working set needs more of the device than the cache leaves.
  void trim(const std::string& task, uint64_t cap) {
    const uint64_t limit = std::min(budget_, cap);
    drop_others_until(task, limit);
    auto g = group(task);
    if (g == groups_.end()) return;
    while (used_ > limit && !g->trials.empty()) drop_last(*g);
    if (g->trials.empty()) groups_.erase(g);
  }

 private:
  struct entry {
    V value;
    uint64_t bytes = 0;
  };
  struct task_group {
    std::string task;
    std::map<uint32_t, entry> trials;
  };

  typename std::list<task_group>::iterator group(const std::string& task) {
    return std::find_if(groups_.begin(), groups_.end(), [&](const task_group& g) { return g.task == task; });
  }

  void drop_last(task_group& g) {
    auto last = std::prev(g.trials.end());
    used_ -= last->second.bytes;
    g.trials.erase(last);
  }

  // Drops other tasks' entries, least recently used task first, its highest trials
  // first, until the cache holds at most `limit`.
  void drop_others_until(const std::string& keep, uint64_t limit) {
    for (auto it = groups_.end(); used_ > limit && it != groups_.begin();) {
      --it;
      if (it->task == keep) continue;
      while (used_ > limit && !it->trials.empty()) drop_last(*it);
      if (it->trials.empty()) it = groups_.erase(it);
    }
  }

  uint64_t budget_;
  uint64_t used_ = 0;
  std::list<task_group> groups_;  // most recently used first
};

}  // namespace ks
