#include "fleet/worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/secret.hpp"
#include "protocol/worker_link.hpp"

extern char** environ;

namespace ks {

std::string describe_exit(int wstatus) {
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "") +
           (WCOREDUMP(wstatus) ? ", core dumped" : "");
  }
  return "stopped";
}

std::string default_worker_binary() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "kernelskill-gpu";
  return (self.parent_path() / "kernelskill-gpu").string();
}

const std::string& local_worker_token() {
  static const std::string token = [] {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned char c : random_bytes(32)) {
      out += hex[c >> 4];
      out += hex[c & 15];
    }
    return out;
  }();
  return token;
}

result<std::unique_ptr<worker_process>> worker_process::start(const worker_process_options& opts) {
  const std::string binary = opts.binary.empty() ? default_worker_binary() : opts.binary;
  if (access(binary.c_str(), X_OK) != 0)
    return ks::error{"cannot start the GPU worker: '" + binary +
                     "' is not an executable file (set gpus.worker_binary in the config, "
                     "or build kernelskill-gpu next to kernelskill)"};
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ks::error{"cannot create a pipe for the GPU worker"};

  // --worker: this process serves one device itself (plain --listen is a node agent).
  std::vector<std::string> args = {binary,        "--listen",    opts.host + ":0", "--worker", "--exit-with-parent",
                                   "--log-level", opts.log_level};
  if (opts.device >= 0) {
    args.push_back("--device");
    args.push_back(std::to_string(opts.device));
  }
  if (opts.trial_cache_gib > 0) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.17g", opts.trial_cache_gib);
    args.push_back("--trial-cache-gib");
    args.push_back(gib);
  }
  if (opts.module_keep_gib > 0) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.17g", opts.module_keep_gib);
    args.push_back("--module-keep-gib");
    args.push_back(gib);
  }
  if (!opts.profile_replay.empty()) {
    args.push_back("--profile-replay");
    args.push_back(opts.profile_replay);
  }
  for (auto [flag, v] : {std::pair{"--reference-cpu-seconds", opts.reference_cpu_seconds},
                         std::pair{"--reference-memory-mb", opts.reference_memory_mb},
                         std::pair{"--reference-wall-seconds", opts.reference_wall_seconds}})
    if (v > 0) {
      args.push_back(flag);
      args.push_back(std::to_string(v));
    }
  if (!opts.sandbox.empty()) {
    args.push_back("--sandbox");
    args.push_back(opts.sandbox);
  }
  for (const auto& p : opts.sandbox_read) {
    args.push_back("--sandbox-read");
    args.push_back(p);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The token goes in the environment (a command line is readable by every user).
  const std::string token_var = std::string(default_worker_token_env) + "=";
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind(token_var, 0) != 0) env.emplace_back(*e);
  if (!opts.token.empty()) env.push_back(token_var + opts.token);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return ks::error{"cannot start the GPU worker '" + binary + "': " + std::strerror(rc)};
  }

  std::unique_ptr<worker_process> proc{new worker_process};
  proc->pid_ = pid;
  proc->host_ = opts.host;
  proc->token_ = opts.token;

  // Read the child's stdout until it names its port, it exits, or time runs out.
  const std::string marker = "listening on ";
  std::string seen;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opts.start_timeout_s * 1000));
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      close(out[0]);
      return ks::error{"the GPU worker '" + binary + "' did not report its address within " +
                       std::to_string(opts.start_timeout_s) + " s"};
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[512];
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) {
      close(out[0]);
      int ws = 0;
      waitpid(pid, &ws, 0);
      proc->pid_ = -1;
      return ks::error{"the GPU worker '" + binary + "' " + describe_exit(ws) + " before it was ready" +
                       (seen.empty() ? "" : ": " + seen)};
    }
    seen.append(buf, static_cast<size_t>(n));
    auto at = seen.find(marker);
    auto eol = at == std::string::npos ? std::string::npos : seen.find('\n', at);
    if (eol != std::string::npos) {
      auto addr = seen.substr(at + marker.size(), eol - at - marker.size());
      proc->port_ = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
      break;
    }
  }
  // Nothing more is read from the pipe; the worker's later output goes to its stderr.
  close(out[0]);
  return proc;
}

void worker_process::record_exit(int wstatus) {
  exit_ = describe_exit(wstatus);
  signal_ = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  status_ = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  pid_ = -1;
}

bool worker_process::exited() const {
  if (pid_ <= 0) return true;
  siginfo_t info{};
  // WNOWAIT: look without reaping.
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return true;
  return info.si_pid == pid_;
}

bool worker_process::alive() {
  if (pid_ <= 0) return false;
  int ws = 0;
  if (waitpid(pid_, &ws, WNOHANG) == pid_) {
    record_exit(ws);
    return false;
  }
  return true;
}

bool worker_process::reap_within(int timeout_ms) {
  for (int waited = 0; alive(); waited += 10) {
    if (waited >= timeout_ms) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void worker_process::kill_now() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

worker_process::~worker_process() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 50; ++i) {  // a worker shuts down in well under 5 s
    if (!alive()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill_now();
}

}  // namespace ks
