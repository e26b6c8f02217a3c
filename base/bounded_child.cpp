#include "base/bounded_child.hpp"

#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ks {

namespace {

// Why a bounded child ended, in words, from its exit status under `timeout` (which
// ends itself by the signal that ended its child).
std::string limit_crossed(int status, const process_limits& limits) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)
    return "it used more than " + std::to_string(limits.cpu_seconds) + " s of CPU time (the limit)";
  if (!WIFEXITED(status)) return "";
  switch (WEXITSTATUS(status)) {
    case 124:
    case 128 + SIGKILL:
      return "it ran longer than " + std::to_string(limits.wall_seconds) + " s (the wall-clock limit)";
    case 128 + SIGXCPU:
      return "it used more than " + std::to_string(limits.cpu_seconds) + " s of CPU time (the limit)";
    default:
      return "";
  }
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

result<bounded_run> run_bounded(const std::string& command, const process_limits& limits,
                                const std::filesystem::path& err_file) {
  // ulimit bounds CPU time and the data segment; timeout bounds the wall clock.
  std::string cmd = "ulimit -S -t " + std::to_string(limits.cpu_seconds) + " && ulimit -H -t " +
                    std::to_string(limits.cpu_seconds + 5) + " && ulimit -d " +
                    std::to_string(static_cast<long long>(limits.memory_mb) * 1024) + " && exec timeout -k 5 " +
                    std::to_string(limits.wall_seconds) + " /bin/sh -c " + shell_quote(command) +
                    " < /dev/null 2> " + shell_quote(err_file.string());
  bounded_run run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return error{"cannot start a child process (popen failed)"};
  char buf[65536];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) run.out.append(buf, got);
  run.status = pclose(pipe);
  run.err = read_all(err_file);
  if (run.status != 0) {
    run.limit = limit_crossed(run.status, limits);
    if (run.limit.empty() && (run.err.find("bad_alloc") != std::string::npos ||
                              run.err.find("Cannot allocate memory") != std::string::npos ||
                              run.err.find("MemoryError") != std::string::npos))
      run.limit = "it needed more than " + std::to_string(limits.memory_mb) + " MiB of memory (the limit)";
  }
  return run;
}

}  // namespace ks
