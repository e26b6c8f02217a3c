// The NVRTC compiler as the reviewer uses it. Runs without a GPU (CI runs it).

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>

#include <unistd.h>
#include <filesystem>

#include "gpu/nvrtc_compiler.hpp"

using namespace ks;

namespace {

const char* scale_kernel = R"(extern "C" __global__ void scale(const float* __restrict__ x,
                                      float* __restrict__ y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
)";

nvrtc_options in_process() {
  nvrtc_options o;
  o.isolate = false;
  return o;
}

}  // namespace

// NVRTC's split compile leaves worker threads finishing in the process that ran it; a
// fork taken while one held NVRTC's lock gave the child a lock nobody releases, and
// its compile hung to the timeout (CI's flaky agent_loop and fleet reviews: 3 seed
// reviews in 900 under load). So an isolating compiler never runs NVRTC itself, not
// even to probe for -split-compile; the builtins library NVRTC loads on its first
// compile says whether it did. ctest runs each case in a process of its own; the case
// comes first so that the whole binary, run by hand, passes too.
TEST_CASE("an isolating compiler never runs NVRTC in its own process", "[nvrtc]") {
  auto nvrtc_ran_here = [] {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
      if (line.find("nvrtc-builtins") != std::string::npos) return true;
    return false;
  };
  REQUIRE_FALSE(nvrtc_ran_here());
  nvrtc_options o;
  o.compile_threads = 2;  // a split compile, as on any machine of two or more cores
  nvrtc_compiler c(o);
  auto r = c.compile(scale_kernel);
  REQUIRE(r);
  CHECK(r->ok);
  CHECK_FALSE(nvrtc_ran_here());
  // In-process, it does (the marker works).
  o.isolate = false;
  auto here = nvrtc_compiler(o).compile(scale_kernel, {"-DIN_PROCESS"});
  REQUIRE(here);
  CHECK(here->ok);
  CHECK(nvrtc_ran_here());
}

TEST_CASE("a correct kernel compiles to PTX and an sm_90a cubin with its resources", "[nvrtc]") {
  for (bool isolate : {false, true}) {
    nvrtc_options o;
    o.isolate = isolate;
    nvrtc_compiler c(o);
    auto r = c.compile(scale_kernel);
    REQUIRE(r);
    CHECK(r->ok);
    CHECK_FALSE(r->cache_hit);
    CHECK(r->ptx.find(".entry scale") != std::string::npos);
    CHECK(r->ptx.find(".target sm_90a") != std::string::npos);
    CHECK(r->cubin.size() > 1000);
    CHECK(r->cubin.compare(0, 4,
                           "\x7f"
                           "ELF") == 0);
    REQUIRE(r->resources.size() == 1);
    CHECK(r->resources[0].kernel == "scale");
    CHECK(r->resources[0].registers > 0);
    CHECK(r->resources[0].local_bytes == 0);
    CHECK(r->diagnostics.empty());
    CHECK(r->key.size() == 64);
  }
}

TEST_CASE("compile errors come back with line and column", "[nvrtc]") {
  nvrtc_compiler c(in_process());
  auto r = c.compile("extern \"C\" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n");
  REQUIRE(r);
  CHECK_FALSE(r->ok);
  CHECK(r->cubin.empty());
  REQUIRE(r->diagnostics.size() == 1);
  CHECK(r->diagnostics[0].line == 2);
  CHECK(r->diagnostics[0].column == 10);
  CHECK(r->diagnostics[0].severity == "error");
  CHECK(r->diagnostics[0].message.find("undefined_name") != std::string::npos);
  CHECK(r->log.find("candidate.cu(2)") != std::string::npos);
}

TEST_CASE("the CUDA headers are on the include path: fp16, bf16, CUB, cooperative groups", "[nvrtc]") {
  nvrtc_compiler c(in_process());
  auto r = c.compile(R"(#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
namespace cg = cooperative_groups;
extern "C" __global__ void row_sum(const __half* x, __nv_bfloat16* y, int n) {
  using reduce = cub::BlockReduce<float, 256>;
  __shared__ typename reduce::TempStorage tmp;
  auto block = cg::this_thread_block();
  float v = 0.f;
  for (int i = block.thread_rank(); i < n; i += 256) v += __half2float(x[blockIdx.x * n + i]);
  float s = reduce(tmp).Sum(v);
  if (block.thread_rank() == 0) y[blockIdx.x] = __float2bfloat16(s);
}
)");
  REQUIRE(r);
  INFO(r->log);
  CHECK(r->ok);
  REQUIRE(r->resources.size() == 1);
  CHECK(r->resources[0].static_shared_bytes > 0);
}

TEST_CASE("a kernel with a large indexed local array reports local memory", "[nvrtc]") {
  nvrtc_compiler c(in_process());
  auto r = c.compile(R"(extern "C" __global__ void spill(const float* x, float* y, int n, int k) {
  float a[512];
  for (int i = 0; i < 512; ++i) a[i] = x[(i * n + threadIdx.x) % 4096];
  y[threadIdx.x] = a[k % 512] + a[(k * 7) % 512];
}
)");
  REQUIRE(r);
  REQUIRE(r->ok);
  REQUIRE(r->resources.size() == 1);
  CHECK(r->resources[0].local_bytes >= 2048);
}

TEST_CASE("the cache: same source and options hit, other options miss", "[nvrtc][cache]") {
  nvrtc_compiler c(in_process());
  auto a = c.compile(scale_kernel);
  auto b = c.compile(scale_kernel);
  auto d = c.compile(scale_kernel, {"--use_fast_math"});
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(d);
  CHECK_FALSE(a->cache_hit);
  CHECK(b->cache_hit);
  CHECK(b->compile_ms == 0);
  CHECK(b->cubin == a->cubin);
  CHECK(b->resources == a->resources);
  CHECK_FALSE(d->cache_hit);
  CHECK(d->key != a->key);
  CHECK(c.cache_hits() == 1);
  CHECK(c.cache_misses() == 2);
}

TEST_CASE("the on-disk cache serves a new compiler instance", "[nvrtc][cache]") {
  auto dir = std::filesystem::temp_directory_path() / ("ks-nvrtc-cache-" + std::to_string(getpid()));
  nvrtc_options o = in_process();
  o.cache_dir = dir.string();
  std::string first_cubin;
  {
    nvrtc_compiler c(o);
    auto r = c.compile(scale_kernel);
    REQUIRE(r);
    INFO(r->log);
    CHECK_FALSE(r->cache_hit);
    CHECK(r->resources.size() == 1);
    first_cubin = r->cubin;
  }
  nvrtc_compiler fresh(o);
  auto r = fresh.compile(scale_kernel);
  REQUIRE(r);
  INFO(r->log);
  CHECK(r->cache_hit);
  CHECK(r->cubin == first_cubin);
  CHECK(r->resources.size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a compile past its time limit is stopped and reported", "[nvrtc][timeout]") {
  nvrtc_options o;
  o.isolate = true;
  o.timeout_s = 0.001;  // far below any real compile (tens of ms)
  nvrtc_compiler c(o);
  auto r = c.compile(scale_kernel);
  REQUIRE(r);
  CHECK_FALSE(r->ok);
  CHECK(r->timed_out);
  REQUIRE_FALSE(r->diagnostics.empty());
  CHECK(r->diagnostics[0].message.find("did not finish") != std::string::npos);
  // Timeouts are not cached: with time, the same source compiles.
  nvrtc_options patient;
  patient.timeout_s = 60;
  auto again = nvrtc_compiler(patient).compile(scale_kernel);
  REQUIRE(again);
  CHECK(again->ok);
}

TEST_CASE("options that could redirect the compile are refused", "[nvrtc]") {
  nvrtc_compiler c(in_process());
  for (auto* bad : {"-arch=sm_80", "--include-path=/etc", "-I/tmp", "--output=x", "-D"}) {
    auto r = c.compile(scale_kernel, {bad});
    INFO(bad);
    REQUIRE_FALSE(r);
    CHECK(r.message().find(bad) != std::string::npos);
  }
  auto ok = c.compile(scale_kernel, {"-DVEC=4", "-maxrregcount=64", "-ftz=true"});
  REQUIRE(ok);
  CHECK(ok->ok);
}

TEST_CASE("ptxas output parsing keeps entries and skips device functions", "[nvrtc]") {
  auto res = parse_ptxas_info(
      "ptxas info    : Compiling entry function 'a' for 'sm_90a'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem\n"
      "ptxas info    : Function properties for _Z6helperv\n"
      "ptxas         .     64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90a'\n"
      "ptxas info    : Function properties for b\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, used 0 barriers\n");
  REQUIRE(res.size() == 2);
  CHECK(res[0].kernel == "a");
  CHECK(res[0].registers == 40);
  CHECK(res[0].local_bytes == 16);
  CHECK(res[0].static_shared_bytes == 4096);
  CHECK(res[1].kernel == "b");
  CHECK(res[1].registers == 8);
  CHECK(res[1].local_bytes == 0);
}

namespace {

// A cubin's sections by name (ELF64, little-endian, as NVRTC writes them).
std::map<std::string, std::string> elf_sections(const std::string& elf) {
  auto u16 = [&](size_t at) {
    uint16_t v = 0;
    std::memcpy(&v, elf.data() + at, 2);
    return v;
  };
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, elf.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, elf.data() + at, 8);
    return v;
  };
  std::map<std::string, std::string> out;
  REQUIRE(elf.size() > 64);
  const uint64_t shoff = u64(0x28);
  const uint16_t shentsize = u16(0x3A), shnum = u16(0x3C), shstrndx = u16(0x3E);
  REQUIRE(shoff + uint64_t{shnum} * shentsize <= elf.size());
  const size_t names = shoff + size_t{shstrndx} * shentsize;
  const uint64_t names_off = u64(names + 0x18);
  for (uint16_t k = 0; k < shnum; ++k) {
    const size_t h = shoff + size_t{k} * shentsize;
    const std::string name(elf.c_str() + names_off + u32(h));
    const uint32_t type = u32(h + 4);
    const uint64_t off = u64(h + 0x18), size = u64(h + 0x20);
    out[name + "#" + std::to_string(k)] = type == 8 /* NOBITS */ ? std::to_string(size) : elf.substr(off, size);
  }
  return out;
}

}  // namespace

// A plan's kernels optimised by several NVRTC threads (-split-compile) come out as the
// serial compile's: every section of the cubin byte for byte but the toolkit note that
// names the options, the same resources per kernel, the same cache key.
TEST_CASE("kernels compiled by several threads are the serial compile's", "[nvrtc][threads]") {
  std::string source;
  for (int k = 0; k < 12; ++k)
    source += "extern \"C\" __global__ void k" + std::to_string(k) +
              "(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  float v = i < n ? x[i] : 0.f;\n"
              "  for (int j = 0; j < " +
              std::to_string(k % 5 + 2) + "; ++j) v = sinf(v) * 1.5f + cosf(v * " + std::to_string(k) +
              ".0f);\n  if (i < n) x[i] = v;\n}\n";
  nvrtc_options serial = in_process();
  serial.compile_threads = 1;
  nvrtc_options parallel = in_process();
  parallel.compile_threads = 4;
  auto a = nvrtc_compiler(serial).compile(source);
  auto b = nvrtc_compiler(parallel).compile(source);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(a->ok);
  REQUIRE(b->ok);
  CHECK(a->key == b->key);
  CHECK(a->ptx == b->ptx);
  auto by_name = [](std::vector<kernel_resources> v) {
    std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.kernel < y.kernel; });
    return v;
  };
  REQUIRE(a->resources.size() == 12);
  CHECK(by_name(a->resources) == by_name(b->resources));
  const auto sa = elf_sections(a->cubin), sb = elf_sections(b->cubin);
  REQUIRE(sa.size() == sb.size());
  size_t texts = 0;
  bool note_differs = false;
  for (const auto& [name, bytes] : sa) {
    INFO(name);
    REQUIRE(sb.count(name));
    texts += name.rfind(".text.", 0) == 0;
    if (name.rfind(".note.nv.tkinfo#", 0) == 0)
      note_differs = bytes != sb.at(name);
    else
      CHECK(bytes == sb.at(name));
  }
  CHECK(texts == 12);
  // The note names the options: it differs exactly when the threads were used.
  if (!note_differs) WARN("this NVRTC (" << nvrtc_compiler::nvrtc_version() << ") compiled serially both times");
}

namespace {

// The state letter of /proc/PID/stat ('Z' a zombie); 0 where the process is gone.
char process_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? 0 : line[close + 2];
}

// The processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

}  // namespace

// Two compiles forked at once each held the other's pipe (fork ignores O_CLOEXEC): with
// the process that asked for them killed (daemon_test SIGKILLs its daemon), each child
// blocked for ever writing its PTX to a pipe its sibling still held. A compile's child
// now dies with its parent.
TEST_CASE("compile children die with the process that asked for them", "[nvrtc]") {
  // Unrolled into PTX of some hundred KB, past a pipe's 64 KB: a write that would block.
  const std::string big =
      "extern \"C\" __global__ void big(float* x) {\n"
      "  float a = x[threadIdx.x];\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 3000; ++i) a = a * 1.0001f + __sinf(a + i);\n"
      "  x[threadIdx.x] = a;\n"
      "}\n";
  const pid_t asker = fork();
  REQUIRE(asker >= 0);
  if (asker == 0) {
    auto compile = [&](const std::string& source) {
      nvrtc_options o;
      o.isolate = true;
      o.timeout_s = 600;
      (void)nvrtc_compiler(o).compile(source);
    };
    // At once, so that each pipe is made before the others fork (each child then holds
    // the others' pipes).
    std::vector<std::thread> all;
    for (int k = 0; k < 6; ++k) all.emplace_back(compile, big + "// " + std::to_string(k) + "\n");
    for (auto& t : all) t.join();
    _exit(0);
  }
  std::vector<pid_t> kids;
  for (int k = 0; k < 500 && kids.size() < 6; ++k) {
    kids = children_of(asker);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(kids.size() == 6);
  ::kill(asker, SIGKILL);
  int ws = 0;
  ::waitpid(asker, &ws, 0);
  for (pid_t kid : kids) {
    INFO("compile child " << kid);
    char state = 'R';
    for (int k = 0; k < 1000 && state != 0 && state != 'Z'; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      state = process_state(kid);
    }
    CHECK((state == 0 || state == 'Z'));
    if (state != 0 && state != 'Z') ::kill(kid, SIGKILL);
  }
}
