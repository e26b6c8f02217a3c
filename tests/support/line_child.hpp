#pragma once
// A child process whose stdout and stderr come back through one pipe, read line by
// line: what the store's crash tests (tests/store_test.cpp) and the store's fault sweep
// (tests/support/store_fault.cpp, also behind bench/store/fault_sweep_main.cpp) drive their writers
// with. Catch-free, so that the bench links it too: failures to start or to wait
// throw std::runtime_error (a test case reports them as failures).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace ks::testing {

class line_child {
 public:
  explicit line_child(const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("posix_spawn " + args[0] + ": " + std::strerror(rc));
    }
  }
  ~line_child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  line_child(const line_child&) = delete;
  line_child& operator=(const line_child&) = delete;

  // The next line, or nullopt at end of output (a partial last line is not a line).
  std::optional<std::string> next_line() {
    for (;;) {
      auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      char chunk[4096];
      ssize_t n = ::read(out_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void kill_now() { ::kill(pid_, SIGKILL); }

  // Waits for the child to end; waitpid's status.
  int wait() {
    int st = 0;
    if (::waitpid(pid_, &st, 0) != pid_) throw std::runtime_error("waitpid failed");
    pid_ = -1;
    return st;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
};

}  // namespace ks::testing
