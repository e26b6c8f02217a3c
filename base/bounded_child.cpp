#include "base/bounded_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

extern char** environ;

namespace ks {

namespace {

// Why a bounded child ended, in words, from its exit status (SIGXCPU at the soft CPU
// limit, SIGKILL at the hard one) and whether the wall clock ran out.
std::string limit_crossed(int status, const process_limits& limits, bool wall_clock) {
  if (wall_clock) return "it ran longer than " + std::to_string(limits.wall_seconds) + " s (the wall-clock limit)";
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)
    return "it used more than " + std::to_string(limits.cpu_seconds) + " s of CPU time (the limit)";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGXCPU)
    return "it used more than " + std::to_string(limits.cpu_seconds) + " s of CPU time (the limit)";
  return "";
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

// What the child needs, prepared before fork: it may allocate nothing.
struct child_plan {
  int out_fd;
  int parent;
  const char* command;
  const char* err_file;
  rlimit cpu, data;
  const child_sandbox* sandbox;
};

void write_err(const char* text) {
  ssize_t n = ::write(2, text, std::strlen(text));
  (void)n;
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const child_plan& plan) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != plan.parent) ::_exit(127);  // the parent died before prctl
  if (plan.out_fd != 1) {
    ::dup2(plan.out_fd, 1);
    ::close(plan.out_fd);
  }
  const int in = ::open("/dev/null", O_RDONLY);
  if (in >= 0 && in != 0) {
    ::dup2(in, 0);
    ::close(in);
  }
  const int err = ::open(plan.err_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (err < 0) ::_exit(126);
  if (err != 2) {
    ::dup2(err, 2);
    ::close(err);
  }
  ::setrlimit(RLIMIT_CPU, &plan.cpu);
  ::setrlimit(RLIMIT_DATA, &plan.data);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGXCPU}) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // The sandbox before the descriptors close: its ruleset is one of them.
  if (const int code = plan.sandbox->enter(); code != 0) {
    write_err(child_sandbox::failure_text(code));
    ::_exit(126);
  }
  // Nothing of the caller's but standard streams: a daemon's sockets, store files and
  // pipes stay closed to code it does not trust.
  // (Less the two the sandbox keeps for its own /proc entries: base/sandbox.hpp.)
  const unsigned pinned = static_cast<unsigned>(kPinnedFd);
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, pinned - 1, 0u) != 0 || ::syscall(SYS_close_range, pinned + 2, ~0u, 0u) != 0)
#endif
    for (int fd = 3; fd < 65536; ++fd)
      if (fd != kPinnedFd && fd != kPinnedFd + 1) ::close(fd);
  const char* argv[] = {"sh", "-c", plan.command, nullptr};
  char* const* env = plan.sandbox->environment();
  ::execve("/bin/sh", const_cast<char* const*>(argv), env ? env : environ);
  ::_exit(127);
}

// Ends the child's process group (SIGTERM, SIGKILL 5 s later for what still runs) and
// reaps the child into `status` unless `reaped` says it was.
void end_group(pid_t pid, int& status, bool& reaped) {
  ::kill(-pid, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (reaped && ::kill(-pid, 0) != 0) return;
    ::usleep(100 * 1000);
  }
  ::kill(-pid, SIGKILL);
  while (!reaped && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  reaped = true;
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
  sandbox_policy policy = limits.sandbox;
  if (policy.scratch.empty()) policy.scratch = err_file.parent_path().empty() ? "." : err_file.parent_path();
  auto sandbox = child_sandbox::prepare(policy);
  if (!sandbox) return error{"cannot start a child process: " + sandbox.message()};
  const std::string err_path = err_file.string();
  child_plan plan{};
  plan.command = command.c_str();
  plan.err_file = err_path.c_str();
  plan.cpu = {static_cast<rlim_t>(limits.cpu_seconds), static_cast<rlim_t>(limits.cpu_seconds) + 5};
  const rlim_t data = static_cast<rlim_t>(limits.memory_mb) * 1024 * 1024;
  plan.data = {data, data};
  plan.sandbox = &*sandbox;
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
    plan.parent = static_cast<int>(::getpid());
    plan.out_fd = fds[1];
    pid = ::fork();
    if (pid == 0) exec_child(plan);
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
  // Its output until the end or the wall clock's limit; then the group ends.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limits.wall_seconds);
  bool wall_clock = false;
  char buf[65536];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      wall_clock = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got > 0)
      run.out.append(buf, static_cast<size_t>(got));
    else if (got == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  // The child, once its output ended: it may still run (it closed standard output).
  int status = 0;
  bool reaped = false;
  while (!wall_clock) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) {
      reaped = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      wall_clock = true;
    else
      ::usleep(10 * 1000);
  }
  if (wall_clock)
    end_group(pid, status, reaped);
  else
    ::kill(-pid, SIGKILL);  // the child is done: nothing it started outlives it
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
  } else if (run.status != 0 || wall_clock) {
    run.limit = limit_crossed(run.status, limits, wall_clock);
    if (wall_clock && run.status == 0) run.status = 128 + SIGTERM;
    if (run.limit.empty() && (run.err.find("bad_alloc") != std::string::npos ||
                              run.err.find("Cannot allocate memory") != std::string::npos ||
                              run.err.find("MemoryError") != std::string::npos))
      run.limit = "it needed more than " + std::to_string(limits.memory_mb) + " MiB of memory (the limit)";
  }
  return run;
}

}  // namespace ks
