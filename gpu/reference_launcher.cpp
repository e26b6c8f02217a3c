#include "gpu/reference_launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <regex>
#include <string_view>

#include "base/private_dir.hpp"
#include "task/task_files.hpp"
#include "task/task_loader.hpp"

namespace ks {

namespace {

// Messages are strings, each a 64-bit length and its bytes.
constexpr uint64_t kLongest = uint64_t{1} << 36;  // a module of 64 GiB is not a task

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool send_string(int fd, std::string_view s) {
  const uint64_t n = s.size();
  return write_all(fd, reinterpret_cast<const char*>(&n), sizeof n) && write_all(fd, s.data(), s.size());
}

bool receive_string(int fd, std::string& s) {
  uint64_t n = 0;
  if (!read_all(fd, reinterpret_cast<char*>(&n), sizeof n) || n > kLongest) return false;
  s.assign(n, '\0');
  return read_all(fd, s.data(), n);
}

// One request: the task as YAML whose module (if any) is "module.pt", the module's
// bytes, the size, the device, the wall clock.
void serve(int fd, const std::string& program, const process_limits& limits) {
  for (;;) {
    std::string yaml, module, size, device, wall;
    if (!receive_string(fd, yaml) || !receive_string(fd, module) || !receive_string(fd, size) ||
        !receive_string(fd, device) || !receive_string(fd, wall))
      return;  // the worker is gone (or spoke nonsense): so are we
    auto answer = [&]() -> result<bounded_run> {
      auto dir = private_dir::create("ks-reflaunch");
      if (!dir) return error{dir.message()};
      if (!module.empty()) {  // the YAML names it module.pt
        std::ofstream out(dir->path() / "module.pt", std::ios::binary);
        out << module;
        if (!out.flush()) return error{"cannot write " + (dir->path() / "module.pt").string()};
      }
      if (!std::regex_match(device, std::regex("cpu|cuda:[0-9]{1,4}")))
        return error{"the reference launcher runs references on cpu or cuda:N, not '" + device.substr(0, 40) + "'"};
      auto task = parse_task(yaml, "<the worker's task>", dir->path());
      if (!task) return error{task.message()};
      process_limits bounded = limits;
      char* end = nullptr;
      const long asked = std::strtol(wall.c_str(), &end, 10);
      if (end != wall.c_str() && asked > 0) bounded.wall_seconds = std::min<long>(bounded.wall_seconds, asked);
      return run_reference_child(program, device, *task, size, bounded);
    }();
    const std::string ok = answer ? "1" : "0";
    bool sent = send_string(fd, ok);
    if (!answer) {
      sent = sent && send_string(fd, answer.message());
    } else {
      sent = sent && send_string(fd, std::to_string(answer->status)) && send_string(fd, answer->out) &&
             send_string(fd, answer->err) && send_string(fd, answer->limit) &&
             send_string(fd, answer->cancelled ? "1" : "0");
    }
    if (!sent) return;
  }
}

std::string shell_words(const std::string& program, const std::string& yaml, const std::string& device,
                        const std::string& size) {
  std::string cmd = "exec " + shell_quote(program) + " --log-level error --run-reference " + shell_quote(yaml) +
                    " --on " + shell_quote(device.empty() ? "cpu" : device);
  if (!size.empty()) cmd += " --size " + shell_quote(size);
  return cmd;
}

}  // namespace

result<bounded_run> run_reference_child(const std::string& program, const std::string& device, const task_spec& task,
                                        const std::string& size, const process_limits& limits) {
  auto dir = private_dir::create("ks-refcheck");
  if (!dir) return error{dir.message()};
  auto yaml = write_task_files(task, dir->path());
  if (!yaml) return error{yaml.message()};
  const std::string named = !size.empty() && task.sizes.count(size) ? size : "";
  return run_bounded(shell_words(program, yaml->string(), device, named), limits, dir->path() / "reference.err");
}

result<std::shared_ptr<reference_launcher>> reference_launcher::start(const std::string& program,
                                                                      const process_limits& limits) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return error{std::string("cannot start the reference launcher (socketpair): ") + std::strerror(errno)};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return error{std::string("cannot start the reference launcher (fork): ") + std::strerror(e)};
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    // Standard output is the worker's (the daemon reads its port there): not ours.
    if (int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) ::dup2(null, STDOUT_FILENO);
    ::prctl(PR_SET_NAME, "ks-reflaunch");
    serve(fds[1], program, limits);
    ::_exit(0);  // a fork of the worker: none of its exit handlers
  }
  ::close(fds[1]);
  return std::shared_ptr<reference_launcher>(new reference_launcher(fds[0], pid));
}

reference_launcher::~reference_launcher() {
  ::close(fd_);  // it reads the end, and ends
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

result<bounded_run> reference_launcher::run(const task_spec& task, const std::string& size, const std::string& device,
                                            int wall_seconds) {
  task_spec sent = task;  // shares the module's bytes: none are copied to send them
  if (!task.module_bytes.empty()) {
    sent.module_bytes.clear();
    sent.module_path = "module.pt";
  }
  std::lock_guard lock(mu_);
  if (!send_string(fd_, to_yaml(sent)) || !send_string(fd_, task.module_bytes) || !send_string(fd_, size) ||
      !send_string(fd_, device) || !send_string(fd_, std::to_string(wall_seconds)))
    return error{"the reference launcher is gone"};
  std::string ok;
  if (!receive_string(fd_, ok)) return error{"the reference launcher is gone"};
  if (ok != "1") {
    std::string why;
    receive_string(fd_, why);
    return error{why};
  }
  bounded_run run;
  std::string status, cancelled;
  if (!receive_string(fd_, status) || !receive_string(fd_, run.out) || !receive_string(fd_, run.err) ||
      !receive_string(fd_, run.limit) || !receive_string(fd_, cancelled))
    return error{"the reference launcher is gone"};
  run.status = std::atoi(status.c_str());
  run.cancelled = cancelled == "1";
  return run;
}

}  // namespace ks
