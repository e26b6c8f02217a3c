#pragma once
// A local kernelskill-gpu child process, started by the daemon and reached over CAF on
// loopback exactly as a remote worker is. The daemon owns the process: destroying the
// handle terminates it (SIGTERM, then SIGKILL), and the child is started with
// --exit-with-parent so that it does not outlive a daemon killed with -9.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

// A random token made once per process (64 hex digits) for the workers it starts.
const std::string& local_worker_token();

struct worker_process_options {
  std::string binary;  // empty = default_worker_binary()
  std::string host = "127.0.0.1";
  int device = -1;                  // --device; -1 = the worker's default
  double start_timeout_s = 60;      // until the worker prints its address
  std::string log_level = "error";  // the daemon reports what matters itself
  double trial_cache_gib = 0;       // --trial-cache-gib; 0 = the worker's default
  double module_keep_gib = 0;       // --module-keep-gib; 0 = the worker's default
  std::string profile_replay;       // --profile-replay; empty = the worker's default (user)
  // The worker asks peers for this token (given in its environment, never on its
  // command line); connect with connect_worker(..., token). Default: this process's
  // own random one, so that other users of the machine cannot drive its workers.
  std::string token = local_worker_token();
  // The limits on the worker's reference checks (--reference-*; 0: the worker's default).
  int reference_cpu_seconds = 0, reference_memory_mb = 0, reference_wall_seconds = 0;
  // The worker's OS sandbox (--sandbox off|auto|required, --sandbox-read PATH; empty:
  // the worker's default, auto): the config's references.sandbox and read_paths.
  std::string sandbox;
  std::vector<std::string> sandbox_read;
};

class worker_process {
 public:
  // Starts the worker with --listen HOST:0 --worker and waits for the line that names its port.
  // Errors name the binary and say what the worker printed or why it exited.
  static result<std::unique_ptr<worker_process>> start(const worker_process_options& opts);
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  const std::string& token() const { return token_; }
  // True while the child has not exited (reaps it if it has).
  bool alive();
  // True once the child has exited, without reaping it: its pid stays its own (and so
  // safe to signal) until alive(), reap_within() or kill_now() reaps it.
  bool exited() const;
  // Ends the child at once (SIGKILL) and reaps it.
  void kill_now();
  // Waits up to `timeout_ms` for the child to exit by itself and reaps it; true if it
  // did. For a child whose connection dropped: was it a crash, and which?
  bool reap_within(int timeout_ms);
  // How the child ended, once reaped: "exited with status 0", "was killed by signal 6
  // (Aborted)"; empty while it runs or when this handle killed it.
  const std::string& exit_description() const { return exit_; }
  // The signal that ended the child, once reaped (0: it exited, or runs, or this
  // handle killed it).
  int exit_signal() const { return signal_; }
  // Its exit status, once reaped, when it exited by itself (-1 otherwise).
  int exit_status() const { return status_; }

 private:
  worker_process() = default;
  void record_exit(int wstatus);
  pid_t pid_ = -1;
  std::string exit_;
  int signal_ = 0;
  int status_ = -1;
  std::string host_;
  uint16_t port_ = 0;
  std::string token_;
};

// "exited with status N" / "was killed by signal N (name)" for a waitpid status.
std::string describe_exit(int wstatus);

// kernelskill-gpu in the directory of the running executable; the build puts both
// programs in <build>/bin.
std::string default_worker_binary();

}  // namespace ks
