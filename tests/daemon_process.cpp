#include "tests/daemon_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace ks::testing {

namespace fs = std::filesystem;

fs::path bin_dir() { return fs::path(KS_BINARY_DIR) / "bin"; }

daemon_process::daemon_process(daemon_options opts) : opts_(std::move(opts)) {
  std::random_device rd;
  dir_ = fs::temp_directory_path() /
         ("ks-daemon-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(dir_);
  std::ofstream cfg(dir_ / "daemon.yaml");
  cfg << "name: daemon-test\n"
      << "gpus:\n"
      << "  worker_binary: " << (bin_dir() / "ks-scripted-gpu").string() << "\n"
      << "  local: " << (opts_.with_gpu ? "[0]" : "none") << "\n"
      << "budgets: {seeds: " << opts_.seeds << ", rounds: " << opts_.rounds
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
  int fds[2];
  if (::pipe(fds) != 0) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    return "";
  }
  const std::string bin = (bin_dir() / "kernelskill").string();
  const std::string cfg = (dir_ / "daemon.yaml").string();
  const std::string log = (dir_ / "serve.log").string();
  std::vector<std::string> args = {bin, "serve", "--config", cfg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string v = *e;
    if (v.rfind("KS_TOKEN=", 0) == 0 || v.rfind("KS_SCRIPTED_REVIEW_MS=", 0) == 0) continue;
    env.push_back(v);
  }
  env.push_back("KS_SCRIPTED_REVIEW_MS=" + std::to_string(opts_.review_ms));
  if (!opts_.token.empty()) env.push_back("KS_TOKEN=" + opts_.token);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  int rc = ::posix_spawn(&pid_, bin.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    pid_ = -1;
    error_ = "posix_spawn " + bin + ": " + std::strerror(rc);
    return "";
  }
  // Read stdout until the URL line (other lines, such as the GPU list, come first).
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  const std::string marker = "listening on ";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char buf[4096];
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      auto at = out.find(marker);
      if (at != std::string::npos) {
        auto end = out.find('\n', at);
        if (end != std::string::npos) {
          url_ = out.substr(at + marker.size(), end - at - marker.size());
          break;
        }
      }
    }
  }
  ::close(fds[0]);  // the daemon prints nothing more on stdout
  if (url_.empty()) {
    error_ = "the daemon did not print its URL; stdout: " + out + "\nstderr: " + this->log();
    kill9();
  }
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
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
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
