#pragma once
// A real full disk for tests, without root: a small tmpfs mounted in a user and mount
// namespace of its own (`unshare -rm`), kept alive by an anchor process, and reached from
// this process through /proc/ANCHOR/root. Writes to it fail with ENOSPC exactly as on a
// full disk; fill() takes the rest of its space with a filler file, release() removes it.
//
// Where user namespaces are not allowed (some distributions restrict them), available()
// is false and why() says so; store_full_test then uses RLIMIT_FSIZE in a child process
// (EFBIG, the other "no space" a writer meets) instead.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace ks::test {

class small_disk {
 public:
  // A tmpfs of `megabytes` MiB mounted over `mountpoint` (created) in a new namespace.
  small_disk(const std::filesystem::path& mountpoint, int megabytes) {
    std::filesystem::create_directories(mountpoint);
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      why_ = "pipe2 failed";
      return;
    }
    // The anchor mounts the tmpfs, says "ready", and lives until its stdin closes.
    std::string script = "mount -t tmpfs -o size=" + std::to_string(megabytes) + "m tmpfs '" + mountpoint.string() +
                         "' && echo ready && exec cat >/dev/null";
    std::vector<std::string> args = {"/usr/bin/unshare", "-rm", "/bin/sh", "-c", script};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    if (rc != 0) {
      why_ = std::string("cannot run unshare: ") + std::strerror(rc);
      pid_ = -1;
      ::close(out[0]);
      return;
    }
    std::string said;
    char buf[256];
    ssize_t n;
    while (said.find('\n') == std::string::npos && (n = ::read(out[0], buf, sizeof buf)) > 0) {
      said.append(buf, static_cast<size_t>(n));
    }
    ::close(out[0]);
    if (said.rfind("ready", 0) != 0) {
      why_ = "no user namespace with a tmpfs here (`unshare -rm` + mount said: " + said + ")";
      return;
    }
    root_ = std::filesystem::path("/proc/" + std::to_string(pid_) + "/root") / mountpoint.relative_path();
  }
  ~small_disk() {
    if (stdin_ >= 0) ::close(stdin_);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  small_disk(const small_disk&) = delete;
  small_disk& operator=(const small_disk&) = delete;

  bool available() const { return !root_.empty(); }
  const std::string& why() const { return why_; }
  // The tmpfs, as this process sees it.
  const std::filesystem::path& root() const { return root_; }

  // Takes every free byte with a filler file (the disk is full afterwards).
  void fill() {
    int fd = ::open((root_ / "filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    std::string zeros(64 * 1024, '\0');
    for (size_t chunk = zeros.size(); chunk > 0; chunk /= 2) {
      while (::write(fd, zeros.data(), chunk) == static_cast<ssize_t>(chunk)) {
      }
    }
    ::close(fd);
  }
  void release() {
    std::error_code ec;
    std::filesystem::remove(root_ / "filler", ec);
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::filesystem::path root_;
  std::string why_;
};

}  // namespace ks::test
