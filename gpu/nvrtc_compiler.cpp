#include "gpu/nvrtc_compiler.hpp"

#include <fcntl.h>
#include <nvrtc.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "base/content_hash.hpp"

#ifndef KS_CUDA_INCLUDE_DIRS
#define KS_CUDA_INCLUDE_DIRS ""
#endif

namespace ks {

namespace {

constexpr const char* source_name = "candidate.cu";

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> default_include_dirs() {
  std::vector<std::string> dirs;
  std::stringstream in(KS_CUDA_INCLUDE_DIRS);
  for (std::string d; std::getline(in, d, '|');)
    if (!d.empty()) dirs.push_back(d);
  return dirs;
}

// Options a candidate may add: ones that tune code generation. Anything that could
// change the target, the include path or where output goes stays under our control.
bool allowed_extra(const std::string& o) {
  static const char* prefixes[] = {
      "-D",          "--define-macro=", "-maxrregcount=", "--maxrregcount=", "-ftz=",   "--ftz=", "-prec-div=",
      "--prec-div=", "-prec-sqrt=",     "--prec-sqrt=",   "-fmad=",          "--fmad=", "-std=",  "--std="};
  if (o == "--use_fast_math" || o == "-use_fast_math" || o == "--extra-device-vectorization" ||
      o == "-extra-device-vectorization")
    return true;
  for (auto* p : prefixes)
    if (o.rfind(p, 0) == 0 && o.size() > std::strlen(p)) return true;
  return false;
}

// --- a tiny length-prefixed encoding, for the child's pipe and the disk cache ---

void put_str(std::string& out, const std::string& s) {
  uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out += s;
}

bool get_str(const std::string& in, size_t& pos, std::string& s) {
  uint64_t n = 0;
  if (pos + sizeof(n) > in.size()) return false;
  std::memcpy(&n, in.data() + pos, sizeof(n));
  pos += sizeof(n);
  if (pos + n > in.size()) return false;
  s.assign(in.data() + pos, n);
  pos += n;
  return true;
}

// Only the compiler's own products are encoded: diagnostics and resources are parsed
// again from the log after decoding.
std::string encode(const compile_result& r) {
  std::string out;
  put_str(out, r.ok ? "1" : "0");
  put_str(out, r.ptx);
  put_str(out, r.cubin);
  put_str(out, r.log);
  put_str(out, std::to_string(r.compile_ms));
  return out;
}

bool decode(const std::string& in, compile_result& r) {
  size_t pos = 0;
  std::string ok, ms;
  if (!get_str(in, pos, ok) || !get_str(in, pos, r.ptx) || !get_str(in, pos, r.cubin) || !get_str(in, pos, r.log) ||
      !get_str(in, pos, ms))
    return false;
  r.ok = ok == "1";
  r.compile_ms = std::atof(ms.c_str());
  return true;
}

// The compile itself. Returns an internal error only when NVRTC cannot be used at all.
result<compile_result> compile_here(const std::string& source, const std::vector<std::string>& options) {
  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog;
  nvrtcResult rc = nvrtcCreateProgram(&prog, source.c_str(), source_name, 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) return ks::error{std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc)};
  std::vector<const char*> argv;
  for (auto& o : options) argv.push_back(o.c_str());
  rc = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  compile_result r;
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  r.log.resize(n);
  if (n) nvrtcGetProgramLog(prog, r.log.data());
  while (!r.log.empty() && r.log.back() == '\0') r.log.pop_back();
  r.ok = rc == NVRTC_SUCCESS;
  if (r.ok) {
    nvrtcGetPTXSize(prog, &n);
    r.ptx.resize(n);
    nvrtcGetPTX(prog, r.ptx.data());
    while (!r.ptx.empty() && r.ptx.back() == '\0') r.ptx.pop_back();
    nvrtcGetCUBINSize(prog, &n);
    r.cubin.resize(n);
    nvrtcGetCUBIN(prog, r.cubin.data());
  } else if (rc != NVRTC_ERROR_COMPILATION) {
    r.log += std::string(r.log.empty() ? "" : "\n") + "nvrtcCompileProgram: " + nvrtcGetErrorString(rc);
  }
  nvrtcDestroyProgram(&prog);
  r.compile_ms = ms_since(t0);
  return r;
}

// Runs compile_here in a forked child, so that it can be killed at the deadline.
result<compile_result> compile_isolated(const std::string& source, const std::vector<std::string>& options,
                                        double timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ks::error{"cannot create a pipe for the compiler"};
  auto t0 = std::chrono::steady_clock::now();
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return ks::error{std::string("cannot fork the compiler: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    close(fds[0]);
    // Dies with its parent: a compile forked beside this one holds a copy of this
    // pipe's read end (fork ignores O_CLOEXEC), so with the parent gone a write here
    // would block for ever. And holds no other process's pipe.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(4);
    if (fds[1] > 3) close_range(3, static_cast<unsigned>(fds[1]) - 1, 0);
    close_range(static_cast<unsigned>(fds[1]) + 1, ~0U, 0);
    auto r = compile_here(source, options);
    std::string blob = r ? encode(*r) : std::string("E") + r.message();
    const char* p = blob.data();
    size_t left = blob.size();
    while (left > 0) {
      ssize_t w = write(fds[1], p, left);
      if (w <= 0) _exit(3);
      p += w;
      left -= static_cast<size_t>(w);
    }
    _exit(r ? 0 : 2);
  }
  close(fds[1]);
  std::string blob;
  bool timed_out = false;
  char buf[65536];
  while (true) {
    double left_ms = timeout_s * 1000 - ms_since(t0);
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(std::min(left_ms, 1e9)) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    blob.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    compile_result r;
    r.timed_out = true;
    r.compile_ms = ms_since(t0);
    r.log = "compilation did not finish within " + std::to_string(timeout_s) + " s and was stopped";
    return r;
  }
  if (WIFSIGNALED(ws)) return ks::error{"NVRTC crashed while compiling (signal " + std::to_string(WTERMSIG(ws)) + ")"};
  if (!blob.empty() && blob[0] == 'E') return ks::error{blob.substr(1)};
  compile_result r;
  if (!decode(blob, r)) return ks::error{"the compiler process returned a truncated result"};
  return r;
}

// The threads to optimise with: opts.compile_threads (0: min(4, hardware threads)),
// or 1 where this NVRTC does not take -split-compile (probed once, on a tiny kernel).
// An isolating compiler probes in a child too: a split compile leaves a worker thread
// of NVRTC's in the process, and a fork taken while that thread holds NVRTC's lock
// gives the child a lock nobody will release, so the child's own split compile hangs
// until the timeout (1 fork in 200 under load, NVRTC 13.0; seen as CI's flaky
// agent_loop and fleet reviews). The probe's bound is its own: a timed-out probe
// means serial compiles for the process, never a failed one.
int compile_threads(const nvrtc_options& opts) {
  int n = opts.compile_threads > 0 ? opts.compile_threads
                                   : static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
  if (n <= 1) return 1;
  static const bool supported = [&] {
    const std::string probe = "extern \"C\" __global__ void ks_probe() {}\n";
    const std::vector<std::string> options = {"-arch=" + opts.arch, "-split-compile=2"};
    auto r = opts.isolate ? compile_isolated(probe, options, 120) : compile_here(probe, options);
    return r && r->ok;
  }();
  return supported ? n : 1;
}

}  // namespace

std::string nvrtc_compiler::nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

nvrtc_compiler::nvrtc_compiler(nvrtc_options opts) : opts_(std::move(opts)) {
  if (opts_.include_dirs.empty()) opts_.include_dirs = default_include_dirs();
  // Where a driver is installed NVRTC serves repeated compiles from CUDA's compute
  // cache (~/.nv/ComputeCache) without running ptxas, and then its log lacks the
  // ptxas -v report that the resources come from (seen on the H200 machine). This
  // compiler caches by itself, so the compute cache is turned off for the process;
  // the worker loads cubins, never PTX, so nothing else relies on it.
  setenv("CUDA_CACHE_DISABLE", "1", 1);
}

uint64_t nvrtc_compiler::cache_hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t nvrtc_compiler::cache_misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

result<compile_result> nvrtc_compiler::compile(const std::string& source, const std::vector<std::string>& extra) {
  for (auto& o : extra)
    if (!allowed_extra(o))
      return ks::error{"compile option '" + o +
                       "' is not allowed (allowed: -D…, --use_fast_math, "
                       "-maxrregcount=N, -ftz=, -prec-div=, -prec-sqrt=, -fmad=, -std=, "
                       "--extra-device-vectorization)"};
  std::vector<std::string> options = {"-arch=" + opts_.arch, "-std=c++17", "-lineinfo", "--ptxas-options=-v"};
  for (auto& d : opts_.include_dirs) options.push_back("--include-path=" + d);
  options.insert(options.end(), extra.begin(), extra.end());

  std::string keytext = "nvrtc " + nvrtc_version() + "\n";
  for (auto& o : options) keytext += o + "\n";
  keytext += source;
  const std::string key = sha256_hex(keytext);

  auto finish = [&](compile_result r, bool hit) {
    r.key = key;
    r.cache_hit = hit;
    r.diagnostics = parse_nvrtc_log(r.log);
    if (r.ok) r.resources = parse_ptxas_info(r.log);
    if (r.timed_out) r.diagnostics.push_back({0, 0, "error", r.log});
    return r;
  };

  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++hits_;
      compile_result r = *it->second;
      r.compile_ms = 0;
      return finish(std::move(r), true);
    }
  }
  const std::filesystem::path disk =
      opts_.cache_dir.empty() ? std::filesystem::path{} : std::filesystem::path(opts_.cache_dir) / (key + ".nvrtc");
  if (!disk.empty()) {
    std::ifstream in(disk, std::ios::binary);
    std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    compile_result r;
    if (in && !blob.empty() && decode(blob, r)) {
      std::lock_guard<std::mutex> lock(mu_);
      ++hits_;
      cache_[key] = std::make_shared<const compile_result>(r);
      order_.push_back(key);
      r.compile_ms = 0;
      return finish(std::move(r), true);
    }
  }

  if (const int threads = compile_threads(opts_); threads > 1)
    options.push_back("-split-compile=" + std::to_string(threads));  // after the key: same machine code
  auto compiled = opts_.isolate ? compile_isolated(source, options, opts_.timeout_s) : compile_here(source, options);
  if (!compiled) return compiled;
  std::lock_guard<std::mutex> lock(mu_);
  ++misses_;
  // Timeouts are not cached: the next attempt may run on a less loaded machine.
  if (!compiled->timed_out) {
    cache_[key] = std::make_shared<const compile_result>(*compiled);
    order_.push_back(key);
    while (order_.size() > opts_.memory_cache_entries) {
      cache_.erase(order_.front());
      order_.erase(order_.begin());
    }
    if (!disk.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(disk.parent_path(), ec);
      auto tmp = disk.string() + ".tmp" + std::to_string(getpid());
      std::ofstream(tmp, std::ios::binary) << encode(*compiled);
      std::filesystem::rename(tmp, disk, ec);  // atomic: readers never see half a file
    }
  }
  return finish(std::move(*compiled), false);
}

std::vector<compile_diagnostic> parse_nvrtc_log(const std::string& log) {
  std::vector<compile_diagnostic> out;
  static const std::regex head(R"(^(.*)\((\d+)\): (error|warning|remark)( #[0-9A-Za-z-]+)?: (.*)$)");
  std::vector<std::string> lines;
  std::stringstream in(log);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, head)) continue;
    compile_diagnostic d;
    d.line = std::stoi(m[2]);
    d.severity = m[3];
    d.message = m[5];
    // NVRTC echoes the source line, then a line with a caret under the column.
    if (i + 2 < lines.size()) {
      auto caret = lines[i + 2].find('^');
      if (caret != std::string::npos && lines[i + 2].find_first_not_of(" ^") == std::string::npos)
        d.column = static_cast<int32_t>(caret) + 1 - 2;  // NVRTC indents the echo by 2
    }
    if (d.column < 0) d.column = 0;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<kernel_resources> parse_ptxas_info(const std::string& log) {
  std::vector<kernel_resources> out;
  static const std::regex fn(R"(Function properties for (\S+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  std::stringstream in(log);
  kernel_resources* cur = nullptr;
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    // ptxas announces each entry (kernel) before its properties; properties of
    // non-inlined device functions follow no such line and are skipped.
    if (std::regex_search(l, m, entry)) {
      out.push_back({});
      out.back().kernel = m[1];
      cur = nullptr;
      continue;
    }
    if (std::regex_search(l, m, fn)) {
      std::string name = m[1];
      auto it = std::find_if(out.begin(), out.end(), [&](auto& k) { return k.kernel == name; });
      cur = it == out.end() ? nullptr : &*it;
      continue;
    }
    if (!cur) continue;
    if (std::regex_search(l, m, frame)) cur->local_bytes = std::max(std::stoi(m[1]), std::stoi(m[2]));
    if (std::regex_search(l, m, used)) cur->registers = std::stoi(m[1]);
    if (std::regex_search(l, m, smem)) cur->static_shared_bytes = std::stoi(m[1]);
  }
  return out;
}

}  // namespace ks
