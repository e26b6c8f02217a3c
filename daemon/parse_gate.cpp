#include "daemon/parse_gate.hpp"

#include <malloc.h>

namespace ks {

parse_gate::slot parse_gate::enter(size_t bytes) {
  std::unique_lock lock(mu_);
  if (!freed_.wait_for(lock, wait_, [&] { return busy_ < slots_; })) return slot(nullptr, 0);
  ++busy_;
  return slot(this, bytes);
}

void parse_gate::leave(size_t bytes) {
  {
    std::lock_guard lock(mu_);
    --busy_;
  }
  freed_.notify_one();
  // What the parse built is freed by now; glibc keeps freed memory in the arena of the
  // thread that freed it, where the next parse (on another thread, so often another
  // arena) does not find it: four parses in a row reached twice the memory of two at
  // once. Returned now, it is there for whichever comes.
  if (bytes >= trim_above_) ::malloc_trim(0);
}

}  // namespace ks
