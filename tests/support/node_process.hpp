#pragma once
// A GPU node for tests and benches: the real node agent (`kernelskill-gpu --listen`)
// started as an independent process on loopback, its workers the stand-in
// ks-scripted-gpu (real NVRTC, scripted verdicts), so a machine without a GPU can run
// a fleet. The node can be killed (-9), stopped (SIGSTOP, waiting until every thread
// has stopped) and resumed, and started again on the same port. Its stderr (the
// agent's log and its workers') goes to a file in a directory of its own.

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace ks::testing {

struct node_options {
  std::string devices = "0";    // --devices
  int review_ms = 0;            // KS_SCRIPTED_REVIEW_MS for its workers
  std::string gpu_name;         // KS_SCRIPTED_GPU_NAME: the model its devices report; "" = the default
  double review_margin_s = 30;  // --review-margin: the agent's watchdog beyond a review's timeout
  int port = 0;                 // 0: an ephemeral port (port() says which once started)
  bool compile = true;          // false: KS_SCRIPTED_COMPILE=0, its workers skip NVRTC (benches)
  std::string token;            // KS_WORKER_TOKEN for the agent: peers must prove it ("" = none)
  int sms = 0;                  // KS_SCRIPTED_SMS: the SM count its devices report; 0 = the default
};

class node_process {
 public:
  explicit node_process(node_options opts = {});
  ~node_process();  // kills the node (its workers die with it) and removes its directory
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  // Starts the agent and waits up to timeout_s for its "listening on" line; false on
  // failure, with the reason in last_error(). A restart keeps the port it had.
  bool start(double timeout_s = 60);
  void kill9();  // SIGKILL and reap
  // SIGTERM, and wait up to timeout_s for the node to exit; its exit status (-1: it
  // had to be killed).
  int terminate(double timeout_s = 30);
  void stop();    // SIGSTOP, returning once every thread of the agent has stopped
  void resume();  // SIGCONT
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const;  // stderr so far, across restarts
  // How many reviews its workers have begun (ks-scripted-gpu logs each start).
  int reviews_begun() const;
  const std::string& last_error() const { return error_; }

 private:
  node_options opts_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_;
};

// Waits until pred() holds, polling every 20 ms, at most timeout_s; its last value.
bool wait_until(double timeout_s, const std::function<bool()>& pred);

}  // namespace ks::testing
