#include "tests/support/daemon_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"

namespace ks::testing {

namespace fs = std::filesystem;

fs::path bin_dir() { return fs::path(KS_BINARY_DIR) / "bin"; }

namespace {

// "  remote: [\"A\", \"B\"]\n", or nothing for no nodes.
std::string remote_line(const std::vector<std::string>& nodes) {
  if (nodes.empty()) return "";
  std::string s = "  remote: [";
  for (size_t i = 0; i < nodes.size(); ++i) s += (i ? ", \"" : "\"") + nodes[i] + "\"";
  return s + "]\n";
}

}  // namespace

daemon_process::daemon_process(daemon_options opts) : opts_(std::move(opts)) {
  std::random_device rd;
  dir_ = fs::temp_directory_path() / ("ks-daemon-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(dir_);
  std::ofstream cfg(dir_ / "daemon.yaml");
  cfg << "name: daemon-test\n"
      << "gpus:\n"
      << "  worker_binary: "
      << (opts_.worker_binary.empty() ? (bin_dir() / "ks-scripted-gpu").string() : opts_.worker_binary) << "\n"
      << "  local: " << (opts_.with_gpu ? "[0]" : "none") << "\n"
      << remote_line(opts_.remote_nodes) << "budgets: {seeds: " << opts_.seeds << ", rounds: " << opts_.rounds
      << ", repair_attempts: 1, tasks_in_flight: " << opts_.tasks_in_flight << "}\n"
      << "review: {trials: 2}\n"
      << "memory: {path: " << store_dir().string() << "}\n"
      << "serve: {listen: \"127.0.0.1:0\"" << opts_.serve_extra << "}\n"
      << opts_.extra_config;
}

daemon_process::~daemon_process() {
  if (pid_ > 0) kill9();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string daemon_process::start(double timeout_s) {
  error_.clear();
  url_.clear();
  auto env = environment_without({"KS_TOKEN=", "KS_SCRIPTED_REVIEW_MS="});
  env.push_back("KS_SCRIPTED_REVIEW_MS=" + std::to_string(opts_.review_ms));
  if (!opts_.token.empty()) env.push_back("KS_TOKEN=" + opts_.token);
  auto started =
      start_server({(bin_dir() / "kernelskill").string(), "serve", "--config", (dir_ / "daemon.yaml").string()}, env,
                   (dir_ / "serve.log").string(), timeout_s);
  pid_ = started.pid;
  url_ = started.address;
  if (url_.empty()) error_ = "the daemon did not start: " + started.error + "\nstderr: " + this->log();
  return url_;
}

void daemon_process::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

int daemon_process::terminate(double timeout_s) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill9();
  return -1;
}

std::string daemon_process::host() const {
  auto rest = url_.substr(url_.find("//") + 2);
  return rest.substr(0, rest.rfind(':'));
}

int daemon_process::port() const { return std::stoi(url_.substr(url_.rfind(':') + 1)); }

std::string daemon_process::log() const {
  std::ifstream in(dir_ / "serve.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ks::testing
