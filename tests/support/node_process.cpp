#include "tests/support/node_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/daemon_process.hpp"

namespace ks::testing {

namespace fs = std::filesystem;

bool wait_until(double timeout_s, const std::function<bool()>& pred) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

node_process::node_process(node_options opts) : opts_(std::move(opts)), port_(opts_.port) {
  std::random_device rd;
  dir_ = fs::temp_directory_path() / ("ks-node-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(dir_);
}

node_process::~node_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);  // a stopped process takes SIGKILL too, but let it go at once
    kill9();
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

bool node_process::start(double timeout_s) {
  error_.clear();
  auto env = environment_without({"KS_SCRIPTED_", "KS_WORKER_TOKEN"});
  if (!opts_.token.empty()) env.push_back("KS_WORKER_TOKEN=" + opts_.token);
  env.push_back("KS_SCRIPTED_REVIEW_MS=" + std::to_string(opts_.review_ms));
  if (!opts_.gpu_name.empty()) env.push_back("KS_SCRIPTED_GPU_NAME=" + opts_.gpu_name);
  if (!opts_.compile) env.push_back("KS_SCRIPTED_COMPILE=0");
  if (opts_.sms > 0) env.push_back("KS_SCRIPTED_SMS=" + std::to_string(opts_.sms));
  auto started =
      start_server({(bin_dir() / "kernelskill-gpu").string(), "--listen", "127.0.0.1:" + std::to_string(port_),
                    "--devices", opts_.devices, "--worker-binary", (bin_dir() / "ks-scripted-gpu").string(),
                    "--review-margin", std::to_string(opts_.review_margin_s), "--log-level", "info"},
                   env, (dir_ / "node.log").string(), timeout_s);
  pid_ = started.pid;
  if (pid_ <= 0) {
    error_ = "the node did not start: " + started.error + "\nstderr: " + log();
    return false;
  }
  port_ = std::stoi(started.address.substr(started.address.rfind(':') + 1));
  return true;
}

void node_process::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int node_process::terminate(double timeout_s) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = -1;
  const bool ended = wait_until(timeout_s, [&] {
    int ws = 0;
    if (::waitpid(pid_, &ws, WNOHANG) != pid_) return false;
    status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    return true;
  });
  if (!ended) {
    kill9();
    return -1;
  }
  pid_ = -1;
  return status;
}

void node_process::stop() {
  ::kill(pid_, SIGSTOP);
  // The stop takes effect once one of its threads is scheduled; until every thread
  // is stopped the others may still answer.
  const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
  wait_until(10, [&] {
    for (const auto& t : fs::directory_iterator(tasks)) {
      std::ifstream stat(t.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto paren = line.rfind(')');
      const char state = paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
      if (state != 'T' && state != 't') return false;
    }
    return true;
  });
}

void node_process::resume() { ::kill(pid_, SIGCONT); }

std::string node_process::log() const {
  std::ifstream in(dir_ / "node.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int node_process::reviews_begun() const {
  const std::string text = log();
  int n = 0;
  for (size_t at = text.find("ks-scripted-gpu: reviewing "); at != std::string::npos;
       at = text.find("ks-scripted-gpu: reviewing ", at + 1))
    ++n;
  return n;
}

}  // namespace ks::testing
