#pragma once
// Compiles candidate CUDA sources with NVRTC: to PTX and to a cubin for one
// architecture, with the CUDA headers on the include path, compiler messages turned
// into positioned diagnostics, per-kernel resource use from ptxas, a cache keyed by
// source + options + architecture + NVRTC version, and a bound on compile time.
// Needs no GPU and no driver.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.hpp"
#include "model/review.hpp"

namespace ks {

struct nvrtc_options {
  std::string arch = "sm_90a";            // -arch; also the cubin's target
  std::vector<std::string> include_dirs;  // empty = the CUDA headers this build found
  double timeout_s = 30;                  // a compile still running then is killed
  // Compile in a forked child so that a compile can be killed at the timeout and an
  // NVRTC crash cannot take the worker down; NVRTC then never runs in this process.
  // Off = in-process (no timeout): NVRTC keeps a worker thread here afterwards, so a
  // process should not fork compiles once it has compiled in-process.
  bool isolate = true;
  std::string cache_dir;  // optional on-disk cache; empty = memory only
  size_t memory_cache_entries = 512;
  // Threads NVRTC optimises a source's kernels with (-split-compile=N): a network's
  // plan is hundreds of kernels in one source, whose first compile took 20-24 s. 0 =
  // min(4, the machine's hardware threads); 1 = serial. The machine code is the same
  // either way (nvrtc_compiler_test compares every section of the cubins; only the
  // toolkit note naming the options differs), so the cache key leaves it out. Where
  // this NVRTC lacks the option, compiles run serially.
  int compile_threads = 0;
};

// The outcome of one compile. ok=false with diagnostics is the candidate's fault (a
// compile error or timeout); errors returned as ks::error are KernelSkill's own.
struct compile_result {
  bool ok = false;
  bool timed_out = false;
  bool cache_hit = false;
  std::string key;  // cache key (hex)
  std::string ptx;
  std::string cubin;
  std::string log;  // NVRTC's log, verbatim
  std::vector<compile_diagnostic> diagnostics;
  std::vector<kernel_resources> resources;  // one per __global__ function, from ptxas
  double compile_ms = 0;                    // this compile (0.0x on a cache hit)
};

class nvrtc_compiler {
 public:
  explicit nvrtc_compiler(nvrtc_options opts = {});

  // Compiles `source` (named candidate.cu in diagnostics) with the base options plus
  // `extra` (only option kinds that cannot change what is compiled or where output
  // goes are allowed: -D…, --use_fast_math, -maxrregcount=N, -ftz/-prec-div/
  // -prec-sqrt/-fmad=…, --extra-device-vectorization, -std=…). Thread-safe.
  result<compile_result> compile(const std::string& source, const std::vector<std::string>& extra = {});

  // "13.0"
  static std::string nvrtc_version();

  uint64_t cache_hits() const;
  uint64_t cache_misses() const;

 private:
  nvrtc_options opts_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const compile_result>> cache_;
  std::vector<std::string> order_;  // insertion order, for eviction
  uint64_t hits_ = 0, misses_ = 0;
};

// Parses NVRTC's log ("candidate.cu(12): error: …" followed by the source line and a
// caret) into diagnostics with line and column.
std::vector<compile_diagnostic> parse_nvrtc_log(const std::string& log);

// Parses ptxas -v output ("Function properties for k", "Used 32 registers", "N bytes
// spill stores", "N bytes smem", …) into per-kernel resources.
std::vector<kernel_resources> parse_ptxas_info(const std::string& log);

}  // namespace ks
