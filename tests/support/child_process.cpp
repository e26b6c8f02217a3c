#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>

extern char** environ;

namespace ks::testing {

std::vector<std::string> environment_without(const std::vector<std::string>& drop) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string v = *e;
    bool keep = true;
    for (const auto& d : drop)
      if (v.rfind(d, 0) == 0) keep = false;
    if (keep) env.push_back(std::move(v));
  }
  return env;
}

started_server start_server(const std::vector<std::string>& args, const std::vector<std::string>& env,
                            const std::string& stderr_file, double timeout_s) {
  started_server out;
  int fds[2];
  if (::pipe(fds) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  std::vector<std::string> a = args, e = env;
  std::vector<char*> argv, envp;
  for (auto& x : a) argv.push_back(x.data());
  argv.push_back(nullptr);
  for (auto& x : e) envp.push_back(x.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  const int rc = ::posix_spawn(&out.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    out.pid = -1;
    out.error = "posix_spawn " + args[0] + ": " + std::strerror(rc);
    return out;
  }
  // Read stdout until the address line (other lines, such as a GPU list, come first).
  std::string seen;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  const std::string marker = "listening on ";
  while (out.address.empty() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
    auto at = seen.find(marker);
    auto end = at == std::string::npos ? std::string::npos : seen.find('\n', at);
    if (end != std::string::npos) out.address = seen.substr(at + marker.size(), end - at - marker.size());
  }
  ::close(fds[0]);  // nothing more is read from it
  if (out.address.empty()) {
    out.error = args[0] + " did not print its address; stdout: " + seen;
    ::kill(out.pid, SIGKILL);
    ::waitpid(out.pid, nullptr, 0);
    out.pid = -1;
  }
  return out;
}

}  // namespace ks::testing
