#include "base/bounded_child.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace ks {

namespace {

// Why a bounded child ended, in words, from its exit status under `timeout` (which
// ends itself by the signal that ended its child).
std::string limit_crossed(int status, const process_limits& limits) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)
    return "it used more than " + std::to_string(limits.cpu_seconds) + " s of CPU time (the limit)";
  if (!WIFEXITED(status)) return "";
  switch (WEXITSTATUS(status)) {
    case 124:
    case 128 + SIGKILL:
      return "it ran longer than " + std::to_string(limits.wall_seconds) + " s (the wall-clock limit)";
    case 128 + SIGXCPU:
      return "it used more than " + std::to_string(limits.cpu_seconds) + " s of CPU time (the limit)";
    default:
      return "";
  }
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The running children by owner (their process groups), and the owners cancelled.
// Forking happens under the lock, so a cancel either sees a child or keeps it from
// starting.
struct child_registry {
  std::mutex mu;
  std::multimap<std::string, pid_t> running;
  std::set<std::string> cancelled;
};

child_registry& registry() {
  static child_registry r;
  return r;
}

void forget_child(const std::string& owner, pid_t pid) {
  if (owner.empty()) return;
  auto& reg = registry();
  std::lock_guard lock(reg.mu);
  auto [b, e] = reg.running.equal_range(owner);
  for (auto it = b; it != e; ++it)
    if (it->second == pid) {
      reg.running.erase(it);
      return;
    }
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(int out_fd, int parent, const char* command) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
  if (out_fd != 1) {
    ::dup2(out_fd, 1);
    ::close(out_fd);
  }
  // Nothing of the caller's but standard streams: a daemon's sockets, store files and
  // pipes stay closed to code it does not trust.
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGXCPU}) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
  ::_exit(127);
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int cancel_children(const std::string& owner) {
  if (owner.empty()) return 0;
  auto& reg = registry();
  std::lock_guard lock(reg.mu);
  reg.cancelled.insert(owner);
  int n = 0;
  auto [b, e] = reg.running.equal_range(owner);
  for (auto it = b; it != e; ++it) {
    ::kill(-it->second, SIGKILL);
    ++n;
  }
  return n;
}

void release_owner(const std::string& owner) {
  auto& reg = registry();
  std::lock_guard lock(reg.mu);
  reg.cancelled.erase(owner);
}

result<bounded_run> run_bounded(const std::string& command, const process_limits& limits,
                                const std::filesystem::path& err_file, const std::string& owner) {
  // ulimit bounds CPU time and the data segment; timeout bounds the wall clock (and,
  // being the process group's leader already, passes its signals to the whole group).
  const std::string cmd = "ulimit -S -t " + std::to_string(limits.cpu_seconds) + " && ulimit -H -t " +
                          std::to_string(limits.cpu_seconds + 5) + " && ulimit -d " +
                          std::to_string(static_cast<long long>(limits.memory_mb) * 1024) +
                          " && exec timeout -k 5 " + std::to_string(limits.wall_seconds) + " /bin/sh -c " +
                          shell_quote(command) + " < /dev/null 2> " + shell_quote(err_file.string());
  bounded_run run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return error{"cannot start a child process (pipe failed)"};
  pid_t pid = -1;
  {
    auto& reg = registry();
    std::lock_guard lock(reg.mu);
    if (!owner.empty() && reg.cancelled.count(owner)) {
      ::close(fds[0]);
      ::close(fds[1]);
      run.status = -1;
      run.cancelled = true;
      run.limit = "its task was cancelled";
      return run;
    }
    const int parent = static_cast<int>(::getpid());
    pid = ::fork();
    if (pid == 0) exec_child(fds[1], parent, cmd.c_str());
    if (pid > 0) {
      ::setpgid(pid, pid);  // as the child does: no window where a cancel misses the group
      if (!owner.empty()) reg.running.emplace(owner, pid);
    }
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return error{"cannot start a child process (fork failed)"};
  }
  char buf[65536];
  for (;;) {
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got > 0) run.out.append(buf, static_cast<size_t>(got));
    else if (got == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.status = status;
  forget_child(owner, pid);
  {
    auto& reg = registry();
    std::lock_guard lock(reg.mu);
    run.cancelled = !owner.empty() && reg.cancelled.count(owner) && run.status != 0;
  }
  run.err = read_all(err_file);
  if (run.cancelled) {
    run.limit = "its task was cancelled";
  } else if (run.status != 0) {
    run.limit = limit_crossed(run.status, limits);
    if (run.limit.empty() && (run.err.find("bad_alloc") != std::string::npos ||
                              run.err.find("Cannot allocate memory") != std::string::npos ||
                              run.err.find("MemoryError") != std::string::npos))
      run.limit = "it needed more than " + std::to_string(limits.memory_mb) + " MiB of memory (the limit)";
  }
  return run;
}

}  // namespace ks
