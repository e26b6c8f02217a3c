#pragma once
// Parsing a request body (JSON, a task's YAML) is where a request's memory goes: yaml-cpp
// takes up to ~250 bytes per byte of YAML, a JSON document tens. So at most `slots`
// parses run at once, and memory freed by a large one goes back to the system.
//
// What it promises:
// - at most `slots` holders at once; enter() waits up to `wait` for one and then says
//   no (the API answers 503 with Retry-After);
// - when a parse of a body of trim_above bytes or more ends, malloc_trim gives glibc's
//   free memory (every arena's) back to the system: a burst of large bodies neither
//   piles up in per-thread arenas nor leaves the daemon at its peak.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace ks {

class parse_gate {
 public:
  parse_gate(size_t slots, std::chrono::milliseconds wait, size_t trim_above)
      : slots_(slots), wait_(wait), trim_above_(trim_above) {}

  // A slot while it lives; `granted` false when none came in time.
  class slot {
   public:
    slot(slot&& o) noexcept : gate_(o.gate_), bytes_(o.bytes_) { o.gate_ = nullptr; }
    slot(const slot&) = delete;
    slot& operator=(const slot&) = delete;
    slot& operator=(slot&&) = delete;
    ~slot() {
      if (gate_) gate_->leave(bytes_);
    }
    bool granted() const { return gate_ != nullptr; }

   private:
    friend class parse_gate;
    slot(parse_gate* g, size_t bytes) : gate_(g), bytes_(bytes) {}
    parse_gate* gate_;
    size_t bytes_;
  };

  // A slot for parsing `bytes` of body.
  slot enter(size_t bytes);

 private:
  void leave(size_t bytes);

  const size_t slots_;
  const std::chrono::milliseconds wait_;
  const size_t trim_above_;
  std::mutex mu_;
  std::condition_variable freed_;
  size_t busy_ = 0;
};

}  // namespace ks
