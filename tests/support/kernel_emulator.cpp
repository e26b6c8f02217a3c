#include "tests/support/kernel_emulator.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>

#include "base/content_hash.hpp"
#include "plan/kernel_signatures.hpp"

namespace ks::test {

namespace {

// One OS thread; each CUDA thread is a fiber that yields to the block's scheduler at
// every barrier. A pass over the fibers brings each to its next barrier,
// which is what __syncthreads and a warp shuffle need (done fibers are skipped).
// A cluster's blocks (a kernel declared with __cluster_dims__) run one after another
// up to each barrier across the cluster, then on from it: each block its own dynamic
// shared memory, which ks_cluster_map reads across. Static __shared__ arrays are one
// for all blocks, so what a block keeps in them must not outlive a cluster barrier
// (the templates' block combines use them between two barriers of one block).
const char* kShim = R"SHIM(
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>
struct dim3_t { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
static dim3_t threadIdx, blockIdx, blockDim, gridDim;
// A fiber switch saves the callee-saved registers on the stack it leaves, then takes
// up the other's: what ucontext's swapcontext does, less its two signal-mask system
// calls, which took 80 % of the time of a network's plan (9_ResNet18 at batch 2: 38 %
// in swapcontext, 40 % in the kernel on its behalf), and less the FP control words
// (MXCSR, the x87 control word), whose loads then took half of what was left: every
// fiber runs under the one FP environment of the launch, which the kernels' code
// never changes. x86-64 only; elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void ks_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .p2align 4
  .hidden ks_switch
  .type ks_switch, @function
ks_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ks_switch, .-ks_switch
)");
struct ks_fiber { void* sp = nullptr; std::vector<char> stack; bool done = false, at_cluster = false; };
static void* ks_main = nullptr;
static inline void ks_to_main(ks_fiber& f) { ks_switch(&f.sp, ks_main); }
static inline void ks_to_fiber(ks_fiber& f) { ks_switch(&ks_main, f.sp); }
#else
#include <ucontext.h>
struct ks_fiber { ucontext_t ctx; std::vector<char> stack; bool done = false, at_cluster = false; };
static ucontext_t ks_main;
static inline void ks_to_main(ks_fiber& f) { swapcontext(&f.ctx, &ks_main); }
static inline void ks_to_fiber(ks_fiber& f) { swapcontext(&ks_main, &f.ctx); }
#endif
static std::vector<ks_fiber> ks_fibers;
static unsigned ks_cur = 0;   // the running fiber: rank * blockDim.x + threadIdx.x
static unsigned ks_rank = 0;  // the running block's rank in its cluster
static std::function<void()> ks_body;
static std::vector<double> ks_slots;  // a lane's shuffled value: float or double, exact either way
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__
// A block's dynamic shared memory: NaN at the start of every block (a read of what no
// thread copied shows), followed by guard words that a launch checks afterwards (a
// write past the plan's shared_mem is an error, as it would be a fault on a GPU).
static std::vector<std::vector<float>> ks_dynamic;  // a cluster's blocks', by rank
static size_t ks_dynamic_n = 0;
constexpr size_t ks_guard = 64;
constexpr float ks_guard_value = 1234.5f;
#define KS_DYNAMIC_SHARED(name) float4* const name = reinterpret_cast<float4*>(ks_dynamic[ks_rank].data())
// A block whose thread 0 runs to its end without a barrier or a shuffle runs its other
// threads as plain calls, one after another (ks_run): most kernels of a plan are such,
// and a switch per thread cost more than their work. A barrier in CUDA is reached by
// every thread of the block or by none, so one such thread reaching a barrier anyway
// is reported (ks_divergent), not waited for.
static bool ks_direct = false, ks_divergent = false;
static inline void ks_yield() {
  if (ks_direct) {
    ks_divergent = true;
    return;
  }
  ks_to_main(ks_fibers[ks_cur]);
  threadIdx.x = ks_cur % blockDim.x;
}
#define __cluster_dims__(...)
#define KS_CLUSTER_EMULATED 1
// A barrier across the cluster: the fiber waits until every thread of every block of
// the cluster has reached one (or is done). arrive/wait pairs are kept as a whole
// barrier at the wait.
inline void ks_cluster_sync() { ks_fibers[ks_cur].at_cluster = true; ks_yield(); }
inline void ks_cluster_arrive() {}
inline void ks_cluster_wait() { ks_cluster_sync(); }
// The place p (in this block's dynamic shared memory) in block `rank`'s.
inline const float* ks_cluster_map(const float* p, unsigned rank) {
  return ks_dynamic[rank].data() + (p - ks_dynamic[ks_rank].data());
}
inline void __syncthreads() { ks_yield(); }
template <class T> inline T __shfl_xor_sync(unsigned, T v, int o) {
  unsigned t = threadIdx.x;
  ks_slots[t] = v;
  ks_yield();
  T r = static_cast<T>(ks_slots[(t & ~31u) | ((t & 31u) ^ (unsigned)o)]);
  ks_yield();
  return r;
}
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
template <class T> inline T __shfl_up_sync(unsigned, T v, int o) {
  unsigned t = threadIdx.x;
  ks_slots[t] = v;
  ks_yield();
  T r = (t & 31u) >= (unsigned)o ? static_cast<T>(ks_slots[t - o]) : v;
  ks_yield();
  return r;
}
template <class T> inline T __shfl_sync(unsigned, T v, int src) {
  unsigned t = threadIdx.x;
  ks_slots[t] = v;
  ks_yield();
  T r = static_cast<T>(ks_slots[(t & ~31u) | (unsigned)src]);
  ks_yield();
  return r;
}
inline float __int_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
// Cache hints change where data lives on a GPU, not what a load returns.
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
static void ks_entry() {
  ks_body();
  ks_fibers[ks_cur].done = true;
#if defined(__x86_64__)
  ks_to_main(ks_fibers[ks_cur]);  // never resumed: the next block starts it afresh
#endif
}
// Makes `f` start at ks_entry on its own stack when next switched to.
static void ks_start(ks_fiber& f) {
#if defined(__x86_64__)
  // The stack ks_switch takes up: six registers, then ks_entry as the return address,
  // whose frame sees the stack as after a call (rsp + 8 aligned to 16). ks_entry
  // never returns from there.
  // Each fiber's top a cache line further into its stack, modulo 4 KiB: at one offset
  // every switch would land in the same L1 set (a 64 KiB stride).
  const size_t color = static_cast<size_t>(&f - ks_fibers.data()) % 64 * 64;
  auto* top = reinterpret_cast<unsigned long long*>(
      (reinterpret_cast<unsigned long long>(f.stack.data() + f.stack.size() - color)) & ~15ull);
  *--top = 0;  // ks_entry's return address: none
  *--top = reinterpret_cast<unsigned long long>(&ks_entry);
  for (int k = 0; k < 6; ++k) *--top = 0;
  f.sp = top;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack.data();
  f.ctx.uc_stack.ss_size = f.stack.size();
  f.ctx.uc_link = &ks_main;
  makecontext(&f.ctx, ks_entry, 0);
#endif
}
// Returns 0, 1 when a block wrote past its dynamic shared memory, 2 when the grid is
// not a whole number of clusters, 3 when some threads of a block reached a barrier or
// shuffle that thread 0 did not.
template <class F>
int ks_run(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned long long smem, unsigned cl, F body) {
  if (cl == 0 || gx % cl != 0) return 2;
  ks_divergent = false;
  gridDim = {gx, gy, gz};
  ks_dynamic_n = (smem + 15) / 16 * 4;
  blockDim = {bx, 1, 1};
  ks_body = body;
  ks_fibers.resize(bx * cl);
  ks_dynamic.resize(cl);
  ks_slots.assign(((bx + 31) / 32) * 32, 0.0f);
  for (auto& f : ks_fibers) f.stack.resize(1 << 16);
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x0 = 0; x0 < gx; x0 += cl) {
        for (unsigned r = 0; r < cl; ++r) {
          ks_dynamic[r].assign(ks_dynamic_n, __builtin_nanf(""));
          ks_dynamic[r].resize(ks_dynamic_n + ks_guard, ks_guard_value);
        }
        for (unsigned t = 0; t < bx * cl; ++t) {
          ks_fiber& f = ks_fibers[t];
          f.done = false;
          f.at_cluster = false;
          ks_start(f);
        }
        // Thread 0 first: where it ends without yielding, the block's other threads
        // run as plain calls.
        unsigned first = 0;
        if (cl == 1) {
          ks_rank = 0;
          blockIdx = {x0, y, z};
          ks_cur = 0;
          threadIdx = {0, 0, 0};
          ks_to_fiber(ks_fibers[0]);
          if (ks_fibers[0].done) {
            ks_direct = true;
            for (unsigned t = 1; t < bx; ++t) {
              ks_cur = t;
              threadIdx = {t, 0, 0};
              ks_body();
            }
            ks_direct = false;
            if (ks_divergent) return 3;
          } else {
            first = 1;  // thread 0 waits at its first barrier for the others
          }
        }
        // Each block in turn up to its next barrier across the cluster (or its end),
        // then all released together (nothing left where the block ran plainly).
        for (bool left = !ks_fibers[0].done; left;) {
          left = false;
          for (unsigned r = 0; r < cl; ++r) {
            ks_rank = r;
            blockIdx = {x0 + r, y, z};
            for (bool running = true; running;) {
              running = false;
              for (unsigned t = first; t < bx; ++t) {
                ks_fiber& f = ks_fibers[r * bx + t];
                if (f.done || f.at_cluster) continue;
                ks_cur = r * bx + t;
                threadIdx = {t, 0, 0};
                ks_to_fiber(f);
                running = running || (!f.done && !f.at_cluster);
              }
              if (first) first = 0, running = true;  // thread 0 goes on in the next pass
            }
          }
          for (auto& f : ks_fibers)
            if (f.at_cluster) f.at_cluster = false, left = true;
        }
        for (unsigned r = 0; r < cl; ++r)
          for (size_t g = 0; g < ks_guard; ++g)
            if (ks_dynamic[r][ks_dynamic_n + g] != ks_guard_value) return 1;
      }
  return 0;
}
)SHIM";

std::string scalar_type(const kernel_param& p) {
  switch (p.kind) {
    case scalar_kind::int32:
      return p.is_unsigned ? "unsigned" : "int";
    case scalar_kind::int64:
      return "long long";
    case scalar_kind::float32:
      return "float";
    case scalar_kind::float64:
      return "double";
    default:
      return "int";
  }
}

}  // namespace

result<std::unique_ptr<emulated_module>> emulated_module::build(const std::string& source,
                                                                const std::filesystem::path& work_dir) {
  std::string text = std::string(kShim) + "\n" + source + "\n";
  for (const kernel_signature& k : extract_kernel_signatures(source)) {
    // Blocks a cluster: `__cluster_dims__(G, 1, 1)` in the kernel's declaration.
    unsigned cl = 1;
    const size_t at = source.find("\n" + k.name + "(");
    const size_t decl = at == std::string::npos ? at : source.rfind("extern \"C\"", at);
    if (decl != std::string::npos) {
      const size_t cd = source.find("__cluster_dims__(", decl);
      if (cd != std::string::npos && cd < at) cl = static_cast<unsigned>(std::stoul(source.substr(cd + 17)));
    }
    text += "extern \"C\" int ks_launch_" + k.name +
            "(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned long long smem, void** a) {\n  return "
            "ks_run(gx, gy, gz, bx, smem, " +
            std::to_string(cl) + "u, [=] { " + k.name + "(";
    for (size_t i = 0; i < k.params.size(); ++i) {
      const kernel_param& p = k.params[i];
      if (i) text += ", ";
      // The pointee as declared: float32 data, float64 scratch, int64 indices (argmax),
      // bool masks.
      const std::string elem = p.kind == scalar_kind::float64   ? "double"
                               : p.kind == scalar_kind::int64   ? "long long"
                               : p.kind == scalar_kind::boolean ? "bool"
                                                                : "float";
      if (p.is_pointer)
        text += "*(" + std::string(p.pointee_const ? "const " : "") + elem + "**)a[" + std::to_string(i) + "]";
      else
        text += "*(" + scalar_type(p) + "*)a[" + std::to_string(i) + "]";
    }
    text += "); });\n}\n";
  }
  std::filesystem::create_directories(work_dir);
  const std::string stem = (work_dir / sha256_hex(text).substr(0, 16)).string();
  if (!std::filesystem::exists(stem + ".so")) {
    std::ofstream(stem + ".cpp") << text;
    std::string cmd = "g++ -std=c++20 -O1 -w -shared -fPIC -x c++ " + stem + ".cpp -o " + stem + ".so.tmp 2> " + stem +
                      ".log && mv " + stem + ".so.tmp " + stem + ".so";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(stem + ".log");
      std::string l((std::istreambuf_iterator<char>(log)), {});
      return error{"emulator: the host compiler rejects the source (" + stem + ".cpp):\n" + l.substr(0, 3000)};
    }
  }
  void* h = dlopen((stem + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return error{std::string("emulator: dlopen: ") + dlerror()};
  auto m = std::unique_ptr<emulated_module>(new emulated_module());
  m->handle_ = h;
  return m;
}

emulated_module::~emulated_module() {
  if (handle_) dlclose(handle_);
}

status emulated_module::launch(const std::string& kernel, std::array<int64_t, 3> grid, std::array<int64_t, 3> block,
                               int64_t shared_bytes, std::vector<void*> args) {
  using fn = int (*)(unsigned, unsigned, unsigned, unsigned, unsigned long long, void**);
  auto f = reinterpret_cast<fn>(dlsym(handle_, ("ks_launch_" + kernel).c_str()));
  if (!f) return error{"emulator: no kernel " + kernel};
  if (block[1] != 1 || block[2] != 1) return error{"emulator: only 1-D blocks"};
  const int rc = f(static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
                   static_cast<unsigned>(block[0]), static_cast<unsigned long long>(shared_bytes), args.data());
  if (rc == 2) return error{"emulator: kernel " + kernel + ": its grid is not a whole number of its clusters"};
  if (rc == 3)
    return error{"emulator: kernel " + kernel +
                 ": threads of one block reach a barrier or warp shuffle that its thread 0 does not"};
  if (rc != 0)
    return error{"emulator: kernel " + kernel + " wrote past its " + std::to_string(shared_bytes) +
                 " bytes of dynamic shared memory"};
  return {};
}

}  // namespace ks::test
