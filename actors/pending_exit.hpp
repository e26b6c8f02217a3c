#pragma once
// Exit messages for blocking actors. CAF 0.17 delivers them to a blocking actor (a
// seed line, a task coordinator) as ordinary messages, which it reads only when it
// receives one: a line or coordinator that never looked would ignore every kill. They
// look between their steps (actors/seed_line.hpp, actors/task_coordinator.hpp).

#include <chrono>
#include <optional>

#include <caf/all.hpp>

namespace ks {

// The exit's reason when it asks the actor to stop (any reason but normal).
inline std::optional<caf::error> stop_reason_of(const caf::exit_msg& m) {
  if (m.reason == caf::exit_reason::normal) return std::nullopt;
  return m.reason;
}

// The reason of an exit message waiting in `self`'s mailbox that asks it to stop;
// nullopt when there is none. Other messages stay in the mailbox; it never waits.
inline std::optional<caf::error> pending_exit(caf::blocking_actor* self) {
  std::optional<caf::error> why;
  for (bool more = true; more && !why;)
    self->receive([&](caf::exit_msg& m) { why = stop_reason_of(m); },
                  caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
  return why;
}

}  // namespace ks
