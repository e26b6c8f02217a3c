#pragma once
// The OS sandbox for code KernelSkill does not trust: a submitted reference (the graph
// export, the worker's reference check, the reviews of the worker itself), a KernelBench
// problem's Python (the importer, the bench's side-by-side measurement).
//
// What a sandboxed process can do (where the kernel offers each layer):
// - files (Landlock): read and execute the system's directories (/usr, /lib*, /bin,
//   /sbin, /opt, the few files of /etc that the dynamic loader and Python read), its
//   own program's directory, the directories of LD_LIBRARY_PATH and of the shared
//   libraries the process has loaded (not /, /tmp or a home directory itself: a child
//   started afresh loads them there) and the `read` paths; read, write, create and delete only
//   beneath `scratch`; /dev/null and the random devices, the GPU's device files when
//   `gpu`; /proc of its own process and the system-wide /proc files libraries read
//   (cpuinfo, meminfo, /proc/driver ...), /sys. Everything else — home directories,
//   token files, the store, other processes' /proc — cannot be opened, listed or
//   written, whatever the user's permissions (root's too);
// - network: no new sockets but Unix ones (seccomp), no TCP bind or connect but the
//   one listening port a worker keeps (Landlock, ABI 4+), abstract Unix sockets scoped
//   to the sandbox (Landlock, ABI 6+); where seccomp or that scope is missing, a
//   network namespace of its own for a child, where the kernel lets us make one;
// - other processes: no ptrace, no process_vm_readv/writev (seccomp; Landlock already
//   refuses tracing outside the sandbox), no signals to processes outside it (Landlock
//   ABI 6+); no new namespaces, mounts, kernel modules or io_uring (seccomp);
// - no privileges gained by exec (no_new_privs);
// - its environment: no variable that names a token, key, secret or password; HOME,
//   TMPDIR and the caches (XDG, CUDA, Triton, Inductor) point into `scratch`.
//
// Limits, stated in docs/daemon.md ("Untrusted references"): a named Unix socket in a
// directory it may read can still be connected to; CPU, memory and wall time are
// bounded by base/bounded_child.hpp, not here; where the kernel lacks Landlock or
// seccomp, `best_effort` runs without that layer (and says so once in the log), and
// `required` refuses to run.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

enum class sandbox_mode {
  off,          // run as the user, unconfined (the config's references.sandbox: off)
  best_effort,  // every layer the kernel offers; the missing ones logged once (auto)
  required,     // refuse to run where Landlock or seccomp is missing (required)
};
// "off", "auto", "required".
result<sandbox_mode> parse_sandbox_mode(const std::string& text);
std::string to_string(sandbox_mode mode);

struct sandbox_policy {
  sandbox_mode mode = sandbox_mode::best_effort;
  std::filesystem::path scratch;            // read, write, create, delete beneath
  std::vector<std::filesystem::path> read;  // read and execute beneath (besides the system's)
  bool gpu = true;                          // the GPU's device files, read and write
  // A process sandboxing itself that still binds its listening TCP port (-1: none; 0:
  // an ephemeral port). Children bind nothing.
  int tcp_bind_port = -1;
};

// A policy that confines nothing (mode off): for the project's own helpers, which run
// no submitted code (a probe of the user's Python, a test's checking script).
sandbox_policy unconfined();

// What this kernel offers; probed once.
struct sandbox_support {
  int landlock_abi = 0;  // 0: no Landlock
  bool seccomp = false;  // seccomp filters (and the architecture is one we filter)
  // A child can be given a network namespace of its own (probed only where seccomp or
  // Landlock's socket scope is missing: elsewhere it is not needed).
  bool network_namespace = false;
  // "Landlock ABI 7 (files, TCP ports, signals), seccomp, network namespaces"
  std::string describe() const;
  // What `required` needs and this kernel lacks, in words; empty when nothing.
  std::string missing() const;
};
const sandbox_support& probe_sandbox();

// The two descriptors a sandboxed child keeps open across exec (its own /proc/PID and
// /proc/PID/task, which pin the inodes its Landlock rules are bound to); a launcher
// that closes descriptors after enter() must leave these two.
inline constexpr int kPinnedFd = 1000;

// A sandbox for one child, built in the parent (allocations, path lookups) and entered
// in the child between fork and exec with async-signal-safe system calls only.
class child_sandbox {
 public:
  // An error only where the policy is `required` and a layer is missing, or a path of
  // the policy cannot be used; `off` gives a sandbox that enters nothing.
  static result<child_sandbox> prepare(const sandbox_policy& policy);

  child_sandbox(child_sandbox&&) noexcept;
  child_sandbox& operator=(child_sandbox&&) noexcept;
  ~child_sandbox();

  // In the child (after fork, before exec): a network namespace where possible,
  // no_new_privs, Landlock, seccomp. 0, or a code that names the step that failed (the
  // child should then _exit: see failure_text).
  int enter() const noexcept;
  static const char* failure_text(int code) noexcept;
  // The child's environment for execve (scratch-based HOME and caches, no secrets);
  // nullptr where the policy is off (the caller's own).
  char* const* environment() const noexcept;
  // The layers this sandbox will enter, or why it is unconfined ("off", or what the
  // kernel lacks under best_effort): for a log line.
  const std::string& description() const noexcept;

 private:
  child_sandbox();
  struct state;
  std::unique_ptr<state> s_;
};

// The calling process confines itself (kernelskill-gpu --worker), in two steps: enter()
// at start, while it has one thread (Landlock binds only the calling thread and the
// threads it starts later), and seal_network() once its listening socket is open (no
// sockets but Unix ones from then on, in every thread). An error where the policy is
// `required` and a layer is missing, or when the process already has other threads.
status sandbox_self(const sandbox_policy& policy);
status seal_network(sandbox_mode mode);

// Libraries may start threads while they load, before main: Debian's OpenBLAS starts a
// pool of one thread per core in its constructor. Landlock would not bind those threads,
// so sandbox_self refuses to start beside them. Where the process has more than one
// thread, this re-executes it (/proc/self/exe, the same argv) once with the pools that
// start at load sized to one (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS =1); it returns only
// where no re-execution is needed or it already happened (then sandbox_self says which
// threads are left), or where execv failed (the error).
status reexec_single_threaded(char** argv);

// The environment variables a sandboxed process does not get: names with TOKEN, SECRET,
// PASSWORD, PASSWD, CREDENTIAL, API_KEY, ACCESS_KEY or PRIVATE_KEY in them (any case).
bool secret_variable(const std::string& name);

}  // namespace ks
