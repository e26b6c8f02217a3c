#include "base/sandbox.hpp"

#include <fcntl.h>
#include <glob.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

extern char** environ;

namespace ks {

namespace {

// Landlock's ABI, written out: Debian 12's kernel headers know ABI 2, the kernels we
// run on offer up to 7 (linux/landlock.h upstream).
struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) ll_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
};
struct ll_net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
};
constexpr int kRulePathBeneath = 1, kRuleNetPort = 2;
constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr uint64_t kFsExecute = 1ull << 0, kFsWriteFile = 1ull << 1, kFsReadFile = 1ull << 2, kFsReadDir = 1ull << 3,
                   kFsRemoveDir = 1ull << 4, kFsRemoveFile = 1ull << 5, kFsMakeChar = 1ull << 6, kFsMakeDir = 1ull << 7,
                   kFsMakeReg = 1ull << 8, kFsMakeSock = 1ull << 9, kFsMakeFifo = 1ull << 10, kFsMakeBlock = 1ull << 11,
                   kFsMakeSym = 1ull << 12, kFsRefer = 1ull << 13, kFsTruncate = 1ull << 14;
constexpr uint64_t kNetBindTcp = 1ull << 0, kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnix = 1ull << 0, kScopeSignal = 1ull << 1;

constexpr uint64_t kFileRights = kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate;
constexpr uint64_t kRead = kFsExecute | kFsReadFile | kFsReadDir;
constexpr uint64_t kReadWriteFile = kFsReadFile | kFsWriteFile | kFsTruncate;
// Its own /proc/PID: read, and written where a thread names itself (task/TID/comm).
constexpr uint64_t kOwnProc = kFsReadFile | kFsReadDir | kFsWriteFile | kFsTruncate;
constexpr uint64_t kScratch = kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir | kFsRemoveFile |
                              kFsMakeDir | kFsMakeReg | kFsMakeSock | kFsMakeFifo | kFsMakeSym | kFsRefer | kFsTruncate;

long ll_create(const ll_ruleset_attr* attr, size_t size, uint32_t flags) {
#ifdef SYS_landlock_create_ruleset
  return ::syscall(SYS_landlock_create_ruleset, attr, size, flags);
#else
  errno = ENOSYS;
  return -1;
#endif
}
long ll_add_rule(int fd, int type, const void* attr) {
#ifdef SYS_landlock_add_rule
  return ::syscall(SYS_landlock_add_rule, fd, type, attr, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}
long ll_restrict_self(int fd) {
#ifdef SYS_landlock_restrict_self
  return ::syscall(SYS_landlock_restrict_self, fd, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}

uint64_t handled_fs(int abi) {
  uint64_t fs = (1ull << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) fs |= kFsRefer;
  if (abi >= 3) fs |= kFsTruncate;
  return fs;  // ioctl on devices (ABI 5) stays unhandled: only allowed files can be opened
}

// seccomp: the architecture we filter, and the program.
#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
constexpr bool kFilterable = true;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
constexpr bool kFilterable = true;
#else
constexpr uint32_t kAuditArch = 0;
constexpr bool kFilterable = false;
#endif

// System calls a sandboxed process never needs, answered with an error: tracing and
// other processes' memory, namespaces and mounts, kernel modules and the machine,
// io_uring (its own socket operations bypass the socket rule), keyrings, BPF.
std::vector<int> denied_syscalls() {
  std::vector<int> nr = {
      __NR_ptrace,
      __NR_process_vm_readv,
      __NR_process_vm_writev,
      __NR_mount,
      __NR_umount2,
      __NR_pivot_root,
      __NR_chroot,
      __NR_setns,
      __NR_unshare,
      __NR_init_module,
      __NR_finit_module,
      __NR_delete_module,
      __NR_kexec_load,
      __NR_reboot,
      __NR_swapon,
      __NR_swapoff,
      __NR_open_by_handle_at,
      __NR_name_to_handle_at,
      __NR_bpf,
      __NR_keyctl,
      __NR_add_key,
      __NR_request_key,
      __NR_userfaultfd,
      __NR_acct,
      __NR_quotactl,
#ifdef __NR_kexec_file_load
      __NR_kexec_file_load,
#endif
#ifdef __NR_iopl
      __NR_iopl,
      __NR_ioperm,
#endif
#ifdef __NR_io_uring_setup
      __NR_io_uring_setup,
      __NR_io_uring_enter,
      __NR_io_uring_register,
#endif
#ifdef __NR_fsopen
      __NR_fsopen,
      __NR_fsconfig,
      __NR_fsmount,
      __NR_fspick,
      __NR_move_mount,
      __NR_open_tree,
#endif
#ifdef __NR_mount_setattr
      __NR_mount_setattr,
#endif
  };
  return nr;
}

sock_filter stmt(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }

// The filter: the architecture first (a call from another ABI is killed), then the
// denied calls, clone3 as "not implemented" (its flags are behind a pointer; libc falls
// back to clone, whose flags are checked), socket for Unix sockets only, clone without
// namespace flags; everything else allowed.
std::vector<sock_filter> seccomp_program() {
  const uint32_t ret_errno = SECCOMP_RET_ERRNO;
  std::vector<sock_filter> p;
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
  p.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
  // The x32 ABI's numbers (bit 30) reach the same calls under other numbers.
  p.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
  p.push_back(stmt(BPF_RET | BPF_K, ret_errno | ENOSYS));
#endif
  for (int nr : denied_syscalls()) {
    p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    p.push_back(stmt(BPF_RET | BPF_K, ret_errno | EPERM));
  }
#ifdef __NR_clone3
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  p.push_back(stmt(BPF_RET | BPF_K, ret_errno | ENOSYS));
#endif
  const uint32_t arg0 = offsetof(seccomp_data, args[0]);  // little-endian: the low word
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 4));
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, arg0));
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1));
  p.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  p.push_back(stmt(BPF_RET | BPF_K, ret_errno | EACCES));
  const uint32_t namespaces =
      CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, arg0));
  p.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, namespaces, 0, 1));
  p.push_back(stmt(BPF_RET | BPF_K, ret_errno | EPERM));
  p.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  p.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  return p;
}

bool probe_seccomp() {
  if (!kFilterable) return false;
  // With filters compiled in, a null program is refused as a bad address (EFAULT);
  // without, the mode itself is unknown (EINVAL).
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, nullptr, 0, 0) != 0 && errno == EFAULT;
}

// Whether a child can be given a network namespace: tried in a child, which exits.
bool probe_network_namespace() {
  const bool root = ::geteuid() == 0;
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) ::_exit(::unshare(root ? CLONE_NEWNET : (CLONE_NEWUSER | CLONE_NEWNET)) == 0 ? 0 : 1);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

std::filesystem::path own_directory() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

// /proc's system-wide entries (cpuinfo, meminfo, modules, driver/, sys/, ...), which
// libraries and the CUDA driver read: every top-level entry but the processes' own
// directories (other processes' environments and memory) and those that show the
// kernel's memory, keys or internals.
std::vector<std::string> system_proc_entries() {
  static const std::set<std::string> withheld = {
      "self",        "thread-self", "kcore",       "kmsg",         "keys",          "key-users",
      "kpagecount",  "kpageflags",  "kpagecgroup", "kallsyms",     "sysrq-trigger", "timer_list",
      "sched_debug", "slabinfo",    "vmallocinfo", "pagetypeinfo", "latency_stats", "kpageidle"};
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    // (A link — mounts, net — points into the building process's own directory.)
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || withheld.count(name) || e.is_symlink(ec))
      continue;
    out.push_back(e.path().string());
  }
  return out;
}

// The directories the dynamic loader is pointed at outside the system ones: each entry
// of LD_LIBRARY_PATH, and the directory of every shared object this process has mapped
// (a LibTorch unpacked under /opt or a home directory, libraries found through RPATH).
// A child started afresh (the reference launcher's `kernelskill-gpu --run-reference`)
// loads the same libraries, and those that CUDA, cuDNN and LibTorch open later, from
// there; without them it cannot start. They are the operator's choice, not a task's.
// The root, /tmp and a home directory itself are never given.
std::vector<std::string> library_directories() {
  std::set<std::string> dirs;
  auto add = [&](const std::filesystem::path& d) {
    std::error_code ec;
    if (d.empty() || !d.is_absolute() || !std::filesystem::is_directory(d, ec)) return;
    const std::string s = std::filesystem::weakly_canonical(d, ec).string();
    if (ec || s == "/" || s == "/tmp" || s == "/home" || s == "/root" || s.empty()) return;
    if (const char* home = std::getenv("HOME"); home && s == std::filesystem::path(home).lexically_normal().string())
      return;
    dirs.insert(s);
  };
  if (const char* llp = std::getenv("LD_LIBRARY_PATH")) {
    std::string list = llp;
    size_t start = 0;
    while (start <= list.size()) {
      const size_t end = std::min(list.find(':', start), list.size());
      add(list.substr(start, end - start));
      start = end + 1;
    }
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::filesystem::path file = line.substr(slash);
    const std::string name = file.filename().string();
    if (name.size() > 3 && (name.ends_with(".so") || name.find(".so.") != std::string::npos)) add(file.parent_path());
  }
  return {dirs.begin(), dirs.end()};
}

// The paths every sandboxed process reads (and runs programs from). Listed once, by the
// first sandbox of the process: a process that has confined itself may not list /proc,
// /etc or /dev any more, and its children's sandboxes need the same paths.
std::vector<std::string> list_system_read_paths() {
  std::vector<std::string> out = {"/usr",
                                  "/lib",
                                  "/lib32",
                                  "/lib64",
                                  "/libx32",
                                  "/bin",
                                  "/sbin",
                                  "/opt",
                                  "/etc/ld.so.cache",
                                  "/etc/ld.so.conf",
                                  "/etc/ld.so.conf.d",
                                  "/etc/localtime",
                                  "/etc/timezone",
                                  "/etc/alternatives",
                                  "/etc/nsswitch.conf",
                                  "/etc/mime.types",
                                  "/sys",
                                  "/dev/zero",
                                  "/dev/random",
                                  "/dev/urandom"};
  for (auto& p : glob_paths("/etc/python3*")) out.push_back(p);
  for (auto& p : system_proc_entries()) out.push_back(p);
  for (auto& p : library_directories()) out.push_back(p);
  return out;
}

const std::vector<std::string>& system_read_paths() {
  static const std::vector<std::string> paths = list_system_read_paths();
  return paths;
}

const std::vector<std::string>& gpu_paths() {
  static const std::vector<std::string> paths = glob_paths("/dev/nvidia*");
  return paths;
}

int open_path(const std::string& p) { return ::open(p.c_str(), O_PATH | O_CLOEXEC); }

// Adds a path-beneath rule; a path that does not exist is skipped. For a file only the
// rights of files can be given.
status add_path(int ruleset, const std::string& path, uint64_t rights, uint64_t handled) {
  int fd = open_path(path);
  if (fd < 0) return {};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= kFileRights;
  ll_path_beneath_attr attr{rights & handled, fd};
  const long rc = ll_add_rule(ruleset, kRulePathBeneath, &attr);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return error{"cannot add the sandbox rule for '" + path + "': " + std::strerror(err)};
  return {};
}

struct ruleset_plan {
  int fd = -1;
  uint64_t handled = 0;
  std::string layers;
};

// Landlock's ruleset for `policy` (fd -1 where the kernel has none).
result<ruleset_plan> build_ruleset(const sandbox_policy& policy, int abi) {
  ruleset_plan plan;
  if (abi <= 0) return plan;
  ll_ruleset_attr attr{};
  attr.handled_access_fs = handled_fs(abi);
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    size = sizeof attr;
  }
  const long fd = ll_create(&attr, size, 0);
  if (fd < 0) return error{std::string("cannot create a Landlock ruleset: ") + std::strerror(errno)};
  plan.fd = static_cast<int>(fd);
  plan.handled = attr.handled_access_fs;
  auto fail = [&](const std::string& why) -> result<ruleset_plan> {
    ::close(plan.fd);
    return error{why};
  };
  for (const std::string& p : system_read_paths())
    if (auto st = add_path(plan.fd, p, kRead, plan.handled); !st) return fail(st.message());
  if (auto own = own_directory(); !own.empty())
    if (auto st = add_path(plan.fd, own.string(), kRead, plan.handled); !st) return fail(st.message());
  for (const auto& p : policy.read)
    if (auto st = add_path(plan.fd, p.string(), kRead, plan.handled); !st) return fail(st.message());
  if (auto st = add_path(plan.fd, "/dev/null", kReadWriteFile, plan.handled); !st) return fail(st.message());
  if (policy.gpu) {
    for (const std::string& p : gpu_paths())
      if (auto st = add_path(plan.fd, p, kReadWriteFile | kFsReadDir, plan.handled); !st) return fail(st.message());
  }
  if (!policy.scratch.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(policy.scratch, ec))
      return fail("the sandbox's scratch directory '" + policy.scratch.string() + "' does not exist");
    if (auto st = add_path(plan.fd, policy.scratch.string(), kScratch, plan.handled); !st) return fail(st.message());
  }
  if (abi >= 4 && policy.tcp_bind_port >= 0) {
    ll_net_port_attr port{kNetBindTcp, static_cast<uint64_t>(policy.tcp_bind_port)};
    if (ll_add_rule(plan.fd, kRuleNetPort, &port) != 0)
      return fail(std::string("cannot add the sandbox's port rule: ") + std::strerror(errno));
  }
  plan.layers = "Landlock ABI " + std::to_string(abi) + " (files" + (abi >= 4 ? ", TCP ports" : "") +
                (abi >= 6 ? ", signals, abstract sockets" : "") + ")";
  return plan;
}

std::once_flag missing_logged;

}  // namespace

result<sandbox_mode> parse_sandbox_mode(const std::string& text) {
  if (text == "off") return sandbox_mode::off;
  if (text == "auto") return sandbox_mode::best_effort;
  if (text == "required") return sandbox_mode::required;
  return error{"expected off, auto or required, got '" + text + "'"};
}

sandbox_policy unconfined() {
  sandbox_policy p;
  p.mode = sandbox_mode::off;
  return p;
}

std::string to_string(sandbox_mode mode) {
  switch (mode) {
    case sandbox_mode::off:
      return "off";
    case sandbox_mode::best_effort:
      return "auto";
    case sandbox_mode::required:
      return "required";
  }
  return "?";
}

bool secret_variable(const std::string& name) {
  const std::string n = lower(name);
  for (const char* word :
       {"token", "secret", "password", "passwd", "credential", "api_key", "apikey", "access_key", "private_key"})
    if (n.find(word) != std::string::npos) return true;
  return false;
}

std::string sandbox_support::describe() const {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (landlock_abi > 0) add("Landlock ABI " + std::to_string(landlock_abi));
  if (seccomp) add("seccomp");
  if (network_namespace) add("network namespaces");
  return out.empty() ? "none" : out;
}

std::string sandbox_support::missing() const {
  std::string out;
  if (landlock_abi <= 0)
    out =
        "Landlock (Linux 5.13 or later with landlock among the security modules, e.g. lsm=...,landlock on the "
        "kernel's command line)";
  if (!seccomp)
    out += std::string(out.empty() ? "" : "; ") + "seccomp filters" +
           (kFilterable ? "" : " (not written for this architecture)");
  return out;
}

const sandbox_support& probe_sandbox() {
  static const sandbox_support s = [] {
    sandbox_support out;
    const long abi = ll_create(nullptr, 0, kCreateRulesetVersion);
    out.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
    out.seccomp = probe_seccomp();
    // Only where it would be used (child_sandbox::prepare): the probe makes one.
    if (!out.seccomp || out.landlock_abi < 6) out.network_namespace = probe_network_namespace();
    return out;
  }();
  return s;
}

// The rules for the process's own /proc/PID and /proc/PID/task: read, and written and
// truncated where a thread names itself — the CUDA driver's cuInit writes task/TID/comm
// with O_TRUNC and fails with 304 (CUDA_ERROR_OPERATING_SYSTEM) where it cannot: seen
// on the GPU machine (H100, driver of CUDA 13), where read and write without truncate
// gave 304 and these rights gave 0. Landlock binds a rule to an inode, and procfs may
// drop the inodes of a process's directories when nothing holds them, so the
// descriptors stay open: at kPinnedFd and kPinnedFd + 1 in a child (kept by the
// launcher across exec: run_bounded closes the others), for the process's life in a
// process that confines itself. Async-signal-safe.
void pin_own_proc(int ruleset, uint64_t handled, bool self_process) noexcept {
  const char* paths[] = {"/proc/self", "/proc/self/task"};
  for (int i = 0; i < 2; ++i) {
    int fd = ::open(paths[i], O_PATH | (self_process ? O_CLOEXEC : 0));
    if (fd < 0) continue;
    ll_path_beneath_attr attr{kOwnProc & handled, fd};
    (void)ll_add_rule(ruleset, kRulePathBeneath, &attr);
    if (!self_process && fd != kPinnedFd + i) {
      ::dup2(fd, kPinnedFd + i);
      ::close(fd);
    }
    // In a process that confines itself the descriptor is simply never closed.
  }
}

struct child_sandbox::state {
  sandbox_mode mode = sandbox_mode::off;
  int ruleset = -1;
  std::vector<sock_filter> filter;
  sock_fprog program{};
  int netns = 0;  // 0 none, 1 as root, 2 with a user namespace
  std::string uid_map, gid_map;
  std::vector<std::string> env;
  std::vector<char*> envp;
  std::string description;
};

child_sandbox::child_sandbox() : s_(std::make_unique<state>()) {}
child_sandbox::child_sandbox(child_sandbox&&) noexcept = default;
child_sandbox& child_sandbox::operator=(child_sandbox&&) noexcept = default;
child_sandbox::~child_sandbox() {
  if (s_ && s_->ruleset >= 0) ::close(s_->ruleset);
}

namespace {

// The environment of a sandboxed process: the caller's without secrets, and its home,
// temporary files and caches in its scratch directory.
std::vector<std::string> sandbox_environment(const std::filesystem::path& scratch) {
  std::vector<std::string> env;
  const char* moved[] = {"HOME",
                         "TMPDIR",
                         "TMP",
                         "TEMP",
                         "XDG_CACHE_HOME",
                         "XDG_CONFIG_HOME",
                         "CUDA_CACHE_PATH",
                         "TRITON_CACHE_DIR",
                         "TORCHINDUCTOR_CACHE_DIR",
                         "TORCH_EXTENSIONS_DIR",
                         "PYTHONUSERBASE"};
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    if (secret_variable(name)) continue;
    if (!scratch.empty() && std::find(std::begin(moved), std::end(moved), name) != std::end(moved)) continue;
    env.push_back(std::move(kv));
  }
  if (!scratch.empty()) {
    const std::string s = scratch.string();
    for (const char* name : {"HOME", "TMPDIR", "TMP", "TEMP"}) env.push_back(std::string(name) + "=" + s);
    env.push_back("XDG_CACHE_HOME=" + s + "/.cache");
    env.push_back("XDG_CONFIG_HOME=" + s + "/.config");
    env.push_back("CUDA_CACHE_PATH=" + s + "/.nv");
    env.push_back("TRITON_CACHE_DIR=" + s + "/.triton");
    env.push_back("TORCHINDUCTOR_CACHE_DIR=" + s + "/inductor");
    env.push_back("TORCH_EXTENSIONS_DIR=" + s + "/torch_extensions");
  }
  return env;
}

// The layers `mode` may run without, or an error naming what `required` lacks.
result<std::string> check_support(sandbox_mode mode) {
  const sandbox_support& sup = probe_sandbox();
  const std::string missing = sup.missing();
  if (missing.empty()) return std::string();
  if (mode == sandbox_mode::required)
    return error{"references.sandbox is 'required', but this kernel lacks " + missing +
                 "; set references.sandbox: auto to run references with the layers it has (" + sup.describe() + ")"};
  return missing;
}

void log_missing_once(const std::string& missing) {
  std::call_once(missing_logged, [&] {
    std::fprintf(stderr,
                 "warning: untrusted references run without part of their sandbox: this kernel lacks %s "
                 "(references.sandbox: auto; 'required' refuses to run them)\n",
                 missing.c_str());
  });
}

}  // namespace

result<child_sandbox> child_sandbox::prepare(const sandbox_policy& policy) {
  child_sandbox sb;
  state& s = *sb.s_;
  s.mode = policy.mode;
  if (policy.mode == sandbox_mode::off) {
    s.description = "no sandbox (references.sandbox: off)";
    return sb;
  }
  auto missing = check_support(policy.mode);
  if (!missing) return error{missing.message()};
  if (!missing->empty()) log_missing_once(*missing);
  const sandbox_support& sup = probe_sandbox();
  sandbox_policy p = policy;
  p.tcp_bind_port = -1;  // a child binds nothing
  auto rules = build_ruleset(p, sup.landlock_abi);
  if (!rules) return error{rules.message()};
  s.ruleset = rules->fd;
  std::string layers = rules->layers;
  if (sup.seccomp) {
    s.filter = seccomp_program();
    s.program.len = static_cast<unsigned short>(s.filter.size());
    s.program.filter = s.filter.data();
    layers += std::string(layers.empty() ? "" : ", ") + "seccomp";
  }
  // A network namespace costs a child about 160 ms to make (and more to tear down);
  // where seccomp refuses every socket but Unix ones and Landlock (ABI 6) scopes
  // abstract Unix sockets, it would add nothing: made only where those are missing.
  if (sup.network_namespace && (!sup.seccomp || sup.landlock_abi < 6)) {
    s.netns = ::geteuid() == 0 ? 1 : 2;
    s.uid_map = std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1\n";
    s.gid_map = std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1\n";
    layers += std::string(layers.empty() ? "" : ", ") + "network namespace";
  }
  s.env = sandbox_environment(policy.scratch);
  for (auto& e : s.env) s.envp.push_back(e.data());
  s.envp.push_back(nullptr);
  s.description = layers.empty() ? "no sandbox (this kernel offers none)" : layers;
  return sb;
}

namespace {
// Writes `text` to `path` in the child (async-signal-safe); failures are ignored.
void write_file(const char* path, const std::string& text) noexcept {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = ::write(fd, text.data(), text.size());
  (void)n;
  ::close(fd);
}
}  // namespace

int child_sandbox::enter() const noexcept {
  const state& s = *s_;
  if (s.mode == sandbox_mode::off) return 0;
  if (s.netns == 1) {
    (void)::unshare(CLONE_NEWNET);
  } else if (s.netns == 2 && ::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    write_file("/proc/self/setgroups", "deny");
    write_file("/proc/self/uid_map", s.uid_map);
    write_file("/proc/self/gid_map", s.gid_map);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 1;
  if (s.ruleset >= 0) {
    // Its own /proc/PID, known only now, pinned (pin_own_proc).
    pin_own_proc(s.ruleset, handled_fs(probe_sandbox().landlock_abi), false);
    if (ll_restrict_self(s.ruleset) != 0) return 2;
  }
  if (!s.filter.empty() && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &s.program, 0, 0) != 0) return 3;
  return 0;
}

const char* child_sandbox::failure_text(int code) noexcept {
  switch (code) {
    case 1:
      return "kernelskill: the sandbox could not set no_new_privs\n";
    case 2:
      return "kernelskill: the sandbox could not enter its Landlock ruleset\n";
    case 3:
      return "kernelskill: the sandbox could not install its seccomp filter\n";
    default:
      return "kernelskill: the sandbox failed\n";
  }
}

char* const* child_sandbox::environment() const noexcept {
  return s_->mode == sandbox_mode::off ? nullptr : s_->envp.data();
}

const std::string& child_sandbox::description() const noexcept { return s_->description; }

namespace {
int thread_count() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// The names of the threads besides the calling one ("blas_thread_server" and so on),
// for an error a user can act on.
std::string other_thread_names() {
  std::string out;
  const auto self = std::to_string(::syscall(SYS_gettid));
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    if (e.path().filename() == self) continue;
    std::ifstream in(e.path() / "comm");
    std::string name;
    std::getline(in, name);
    out += (out.empty() ? "" : ", ") + (name.empty() ? e.path().filename().string() : name);
  }
  return out;
}

constexpr const char* kReexecMark = "KS_SANDBOX_REEXEC";
}  // namespace

status reexec_single_threaded(char** argv) {
  if (std::getenv(kReexecMark)) {
    ::unsetenv(kReexecMark);  // its children start afresh
    return {};
  }
  if (thread_count() == 1) return {};
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("GOTO_NUM_THREADS", "1", 1);
  ::setenv(kReexecMark, "1", 1);
  ::execv("/proc/self/exe", argv);
  const int e = errno;
  ::unsetenv(kReexecMark);
  return error{std::string("re-executing /proc/self/exe to start without library threads: ") + std::strerror(e)};
}

status sandbox_self(const sandbox_policy& policy) {
  if (policy.mode == sandbox_mode::off) return {};
  auto missing = check_support(policy.mode);
  if (!missing) return error{missing.message()};
  if (!missing->empty()) log_missing_once(*missing);
  if (const int threads = thread_count(); threads != 1)
    return error{"the sandbox must be entered while the process has one thread (it has " + std::to_string(threads) +
                 ": besides this one " + other_thread_names() +
                 "): Landlock confines only the calling thread and those it starts later"};
  // The secrets leave the environment, and later children's caches go to scratch.
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    if (secret_variable(name)) names.push_back(name);
  }
  for (const auto& n : names) ::unsetenv(n.c_str());
  if (!policy.scratch.empty()) {
    ::setenv("TMPDIR", policy.scratch.c_str(), 1);
    ::setenv("HOME", policy.scratch.c_str(), 1);
    ::setenv("CUDA_CACHE_PATH", (policy.scratch / ".nv").c_str(), 1);
  }
  auto rules = build_ruleset(policy, probe_sandbox().landlock_abi);
  if (!rules) return error{rules.message()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    if (rules->fd >= 0) ::close(rules->fd);
    return error{std::string("cannot set no_new_privs: ") + std::strerror(errno)};
  }
  if (rules->fd >= 0) {
    pin_own_proc(rules->fd, rules->handled, true);
    const long rc = ll_restrict_self(rules->fd);
    const int err = errno;
    ::close(rules->fd);
    if (rc != 0) return error{std::string("cannot enter the Landlock sandbox: ") + std::strerror(err)};
  }
  return {};
}

status seal_network(sandbox_mode mode) {
  if (mode == sandbox_mode::off || !probe_sandbox().seccomp) return {};
  static const std::vector<sock_filter> filter = seccomp_program();
  sock_fprog program{static_cast<unsigned short>(filter.size()), const_cast<sock_filter*>(filter.data())};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program) != 0)
    return error{std::string("cannot install the sandbox's seccomp filter in every thread: ") + std::strerror(errno)};
  return {};
}

}  // namespace ks
