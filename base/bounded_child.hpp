#pragma once
// Runs a command (through /bin/sh) in a child bounded in CPU time, memory and wall
// clock, for code KernelSkill does not trust or cannot predict: a submitted reference
// (the graph export, the worker's reference check), a KernelBench problem file (the
// importer).
//
// What it promises:
// - the child cannot use more than `cpu_seconds` of CPU (SIGXCPU at the soft limit,
//   SIGKILL 5 s of CPU later), allocate more than `memory_mb` (the data limit: heap and
//   writable private mappings, not the address space CUDA's libraries reserve, which an
//   address-space limit would refuse at load), or run longer than `wall_seconds`
//   (SIGTERM, then SIGKILL 5 s later);
// - the child and everything it starts are one process group of their own, so that
//   cancel_children(owner) ends all of them at once (SIGKILL), and a run of an owner
//   already cancelled does not start; the child gets SIGTERM when the thread that
//   started it dies (PR_SET_PDEATHSIG), and inherits no descriptor of the caller's but
//   its standard streams (a daemon's sockets and store files stay out of its reach);
// - its standard output is returned whole, its standard error is kept in a file the
//   caller names, and a child stopped by a limit or a cancel is reported as such, in
//   words;
// - it runs in the OS sandbox of `limits.sandbox` (base/sandbox.hpp): files beneath its
//   scratch directory (by default the directory of `err_file`, which the caller makes
//   private) are all it may write, the system's directories and `sandbox.read` all it
//   may read, no network, no secrets in its environment. A sandbox that `required`
//   cannot have is an error before anything starts; the child's own process is the
//   command's program (no wrapper between), so that /proc/self is its own.

#include <filesystem>
#include <string>

#include "base/result.hpp"
#include "base/sandbox.hpp"

namespace ks {

struct process_limits {
  int cpu_seconds = 120;   // CPU time of the child (SIGXCPU past it)
  int memory_mb = 16384;   // what it allocates (RLIMIT_DATA: allocations fail past it)
  int wall_seconds = 300;  // wall-clock time, then SIGTERM, and SIGKILL 5 s later
  sandbox_policy sandbox;  // where it may read and write (scratch: err_file's directory)
};

struct bounded_run {
  int status = 0;          // as from waitpid
  std::string out;         // everything the child wrote to standard output
  std::string err;         // what it wrote to standard error
  std::string limit;       // why a limit or a cancel stopped it, in words; empty when none did
  bool cancelled = false;  // ended (or never started) by cancel_children
  bool ok() const { return status == 0 && !cancelled; }
};

// Runs `command` (a shell command line whose words the caller has quoted; end it with
// `exec program ...` so that the program is the child itself: the limits' signals reach
// it, and its sandbox's /proc/self is its own) with standard input from /dev/null and
// standard error into `err_file`. `owner` (a task's
// name, say) lets cancel_children end it; empty: no owner. Fails only when the child
// cannot be started.
result<bounded_run> run_bounded(const std::string& command, const process_limits& limits,
                                const std::filesystem::path& err_file, const std::string& owner = "");

// Ends every running child of `owner` (SIGKILL to its process group) and refuses to
// start new ones for it until release_owner(owner). Returns how many were running.
int cancel_children(const std::string& owner);
// Forgets that `owner` was cancelled (its work has ended; the name may come back).
void release_owner(const std::string& owner);

// A word quoted for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace ks
