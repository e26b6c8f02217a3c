#pragma once
// A real `kernelskill serve` child process for tests: a temp directory with a config
// (the scripted GPU worker, a store, port 0), started and waited for until it prints
// its URL, stopped with SIGKILL or SIGTERM, restartable on the same store. The
// daemon's stderr goes to DIR/serve.log (appended across restarts) for failure
// messages.

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ks::testing {

struct daemon_options {
  int seeds = 2;
  int rounds = 3;
  int tasks_in_flight = 2;
  int review_ms = 0;                      // KS_SCRIPTED_REVIEW_MS: how long each review takes
  std::vector<std::string> remote_nodes;  // gpus.remote ("HOST:PORT" of node agents)
  bool with_gpu = true;                   // false: gpus.local none (tasks stay queued)
  std::string token;                      // non-empty: KS_TOKEN for the daemon
  std::string extra_config;               // YAML appended to the config
  std::string memory_path;                // the store; empty: DIR/memory
  std::string serve_extra;                // more keys of `serve:` (", header_timeout_s: 2")
  std::string worker_binary;              // gpus.worker_binary; empty: ks-scripted-gpu
};

class daemon_process {
 public:
  // A fresh directory; nothing runs until start().
  explicit daemon_process(daemon_options opts = {});
  ~daemon_process();  // kills the daemon if running, removes the directory
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  // Starts the daemon and waits (up to timeout_s) for its URL; "" on failure, with
  // the reason in last_error().
  std::string start(double timeout_s = 60);
  void kill9();                          // SIGKILL and reap
  int terminate(double timeout_s = 30);  // SIGTERM; the exit status (-1: had to kill)
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  const std::string& url() const { return url_; }
  std::string host() const;  // "127.0.0.1"
  int port() const;
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path store_dir() const {
    return opts_.memory_path.empty() ? dir_ / "memory" : std::filesystem::path(opts_.memory_path);
  }
  std::string log() const;  // the daemon's stderr so far
  const std::string& last_error() const { return error_; }

 private:
  daemon_options opts_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::string url_;
  std::string error_;
};

// The built programs' directory (KS_BINARY_DIR/bin).
std::filesystem::path bin_dir();

}  // namespace ks::testing
