#pragma once
// A server program started by a test: posix_spawn with the environment given, stderr
// appended to a file, stdout read until the line that says where it listens
// ("… listening on ADDRESS"), then closed. What tests/support/daemon_process.hpp and
// tests/support/node_process.hpp share.

#include <sys/types.h>

#include <string>
#include <vector>

namespace ks::testing {

// This process's environment without the variables whose "NAME=" starts with one of
// `drop` (the caller adds its own values for them).
std::vector<std::string> environment_without(const std::vector<std::string>& drop);

struct started_server {
  pid_t pid = -1;       // -1 when it did not start (then it has been killed and reaped)
  std::string address;  // what followed "listening on " on its stdout
  std::string error;    // why not, with what it printed
};

// Starts args[0] with `args` and `env`, and waits up to timeout_s for its address.
started_server start_server(const std::vector<std::string>& args, const std::vector<std::string>& env,
                            const std::string& stderr_file, double timeout_s);

}  // namespace ks::testing
