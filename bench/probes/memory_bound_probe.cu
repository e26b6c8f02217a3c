// Layout probe for two level-1 shapes the rules coder trails torch.compile on: a
// reduction over a short middle dim (RMSNorm over 64 channels of NCHW) and a 1-d pool
// with stride 1 (max pool, 8 taps, dilation 3). Several thread layouts of the same
// arithmetic, timed alone with CUDA events (L2 flushed before each call, median of 20),
// each checked against the first variant bit for bit.
//
//   nvcc -O3 -arch=sm_90 -o probe bench/probes/memory_bound_probe.cu && ./probe
//
// Conclusion (H200; it measures no KernelSkill code; docs/benchmarks-log.md, fourth
// and sixth runs): RMSNorm ran in 4.78 ms as the rules coder wrote it then and 3.72 ms in 2
// slices of 32, which the coder now writes (3.94 ms in the bench); the pool ran 3.37 ms
// in runs of 4 and 2.82 ms strided by 4 (D), but the rules coder's own strided kernel
// ran 4.37 ms in the bench (2026-12-03), so that layout was taken out again: a probe's
// layout is a lead, not a result.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));      \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// ---- RMSNorm over dim 1: x / sqrt(mean(x^2, 1) + eps) ----

// A: slices S = 8 warps, K = 8 registers, 32 columns a block, 64-bit index (today's).
__global__ void __launch_bounds__(256) rms_a(long long n0, long long n1, long long n2, const float* __restrict__ in0,
                                             float* __restrict__ out) {
  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
  const long long t = (long long)blockIdx.x * 32 + lane;
  const bool live = t < n0 * n2;
  const long long o = live ? t / n2 : 0, j = live ? t % n2 : 0;
  const long long base = o * n1 * n2 + j;
  float a = 0.0f, rc[8];
  if (live) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const long long c = slice + (long long)k * 8;
      if (c < n1) rc[k] = in0[base + c * n2];
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const long long c = slice + (long long)k * 8;
      if (c < n1) a += rc[k] * rc[k];
    }
    for (long long c = slice + 64; c < n1; c += 8) {
      const float x = in0[base + c * n2];
      a += x * x;
    }
  }
  __shared__ float sh[8][33];
  sh[slice][lane] = a;
  __syncthreads();
  a = 0.0f;
  for (int q = 0; q < 8; ++q) a += sh[q][lane];
  if (!live) return;
  const float d = sqrtf(a / (float)n1 + 1e-5f);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const long long c = slice + (long long)k * 8;
    if (c < n1) out[base + c * n2] = rc[k] / d;
  }
  for (long long c = slice + 64; c < n1; c += 8) out[base + c * n2] = in0[base + c * n2] / d;
}

// G<S, K>: G = 256 / (32 S) groups of 32 columns a block, S slices a column, K registers;
// the column and offset by 32-bit division when the sizes fit.
template <int S, int K>
__global__ void __launch_bounds__(256) rms_g(long long n0, long long n1, long long n2, const float* __restrict__ in0,
                                             float* __restrict__ out) {
  constexpr int G = 256 / (32 * S);
  const int lane = threadIdx.x & 31, slice = (threadIdx.x >> 5) % S, group = threadIdx.x / (32 * S);
  const long long t = ((long long)blockIdx.x * G + group) * 32 + lane;
  const long long cols = n0 * n2;
  const bool live = t < cols;
  long long o = 0, j = 0;
  if (live) {
    if (cols * n1 <= 0x7fffffffLL) {
      const unsigned q = (unsigned)t / (unsigned)n2;
      o = q, j = (unsigned)t - q * (unsigned)n2;
    } else {
      o = t / n2, j = t % n2;
    }
  }
  const long long base = o * n1 * n2 + j;
  float a = 0.0f, rc[K];
  if (live) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const long long c = slice + (long long)k * S;
      if (c < n1) rc[k] = in0[base + c * n2];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const long long c = slice + (long long)k * S;
      if (c < n1) a += rc[k] * rc[k];
    }
    for (long long c = slice + (long long)K * S; c < n1; c += S) {
      const float x = in0[base + c * n2];
      a += x * x;
    }
  }
  if (S > 1) {
    __shared__ float sh[G][S][33];
    sh[group][slice][lane] = a;
    __syncthreads();
    a = 0.0f;
    for (int q = 0; q < S; ++q) a += sh[group][q][lane];
  }
  if (!live) return;
  const float d = sqrtf(a / (float)n1 + 1e-5f);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const long long c = slice + (long long)k * S;
    if (c < n1) out[base + c * n2] = rc[k] / d;
  }
  for (long long c = slice + (long long)K * S; c < n1; c += S) out[base + c * n2] = in0[base + c * n2] / d;
}

// ---- max_pool1d, 8 taps, stride 1, padding 4, dilation 3 ----
constexpr int KT = 8, PAD = 4, DIL = 3;

// A: V = 4 consecutive outputs a thread, their 25 inputs loaded once (today's).
__global__ void __launch_bounds__(256) pool_a(const float* __restrict__ in0, long long n1, long long n2, long long n3,
                                              float* __restrict__ out) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n3) return;
  const long long OL = (n2 + 3) / 4;
  const unsigned u = (unsigned)t, q = u / (unsigned)OL;
  long long ow = u - q * (unsigned)OL, plane = q;
  ow *= 4;
  const float* xp = in0 + plane * n1;
  const long long w0 = ow - PAD;
  float acc[4], xs[25];
  bool ok[25];
#pragma unroll
  for (int v = 0; v < 4; ++v) acc[v] = -__int_as_float(0x7f800000);
#pragma unroll
  for (int s = 0; s < 25; ++s) {
    const long long w = w0 + s;
    ok[s] = w >= 0 && w < n1;
    xs[s] = ok[s] ? xp[w] : 0.0f;
  }
#pragma unroll
  for (int v = 0; v < 4; ++v)
#pragma unroll
    for (int l = 0; l < KT; ++l) {
      const int s = v + l * DIL;
      if (ok[s]) acc[v] = (xs[s] > acc[v] || xs[s] != xs[s]) ? xs[s] : acc[v];
    }
  for (int v = 0; v < 4; ++v) {
    if (ow + v >= n2) break;
    out[plane * n2 + ow + v] = acc[v];
  }
}

// B: a thread per output, 2-d grid (x: along the line, y: the line): no division.
__global__ void __launch_bounds__(256) pool_b(const float* __restrict__ in0, long long n1, long long n2,
                                              float* __restrict__ out) {
  const long long ow = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (ow >= n2) return;
  const long long plane = blockIdx.y;
  const float* xp = in0 + plane * n1;
  float acc = -__int_as_float(0x7f800000);
#pragma unroll
  for (int l = 0; l < KT; ++l) {
    const long long w = ow - PAD + l * DIL;
    const bool ok = w >= 0 && w < n1;
    const float x = ok ? xp[w] : 0.0f;
    if (ok) acc = (x > acc || x != x) ? x : acc;
  }
  out[plane * n2 + ow] = acc;
}

// C<V>: V outputs a thread strided by the block (coalesced loads and stores), a tile of
// 256 V outputs of one line a block, its inputs staged in shared memory once.
template <int V>
__global__ void __launch_bounds__(256) pool_c(const float* __restrict__ in0, long long n1, long long n2,
                                              float* __restrict__ out) {
  constexpr int T = 256 * V, SPAN = T + (KT - 1) * DIL;
  __shared__ float tile[SPAN];
  const long long o0 = (long long)blockIdx.x * T;
  const long long plane = blockIdx.y;
  const float* xp = in0 + plane * n1;
  const long long w0 = o0 - PAD;
  for (int s = threadIdx.x; s < SPAN; s += 256) {
    const long long w = w0 + s;
    tile[s] = (w >= 0 && w < n1) ? xp[w] : __int_as_float(0x7fc00001);  // a marked NaN: padding
  }
  __syncthreads();
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int r = threadIdx.x + v * 256;
    const long long ow = o0 + r;
    if (ow >= n2) break;
    float acc = -__int_as_float(0x7f800000);
#pragma unroll
    for (int l = 0; l < KT; ++l) {
      const long long w = w0 + r + l * DIL;
      if (w < 0 || w >= n1) continue;
      const float x = tile[r + l * DIL];
      acc = (x > acc || x != x) ? x : acc;
    }
    out[plane * n2 + ow] = acc;
  }
}

// D<V>: V outputs a thread strided by the block, straight from global memory (L1 serves
// the overlap), 2-d grid.
template <int V>
__global__ void __launch_bounds__(256) pool_d(const float* __restrict__ in0, long long n1, long long n2,
                                              float* __restrict__ out) {
  const long long o0 = (long long)blockIdx.x * 256 * V + threadIdx.x;
  const long long plane = blockIdx.y;
  const float* xp = in0 + plane * n1;
  float acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    acc[v] = -__int_as_float(0x7f800000);
#pragma unroll
    for (int l = 0; l < KT; ++l) {
      const long long w = o0 + v * 256 - PAD + l * DIL;
      const bool ok = w >= 0 && w < n1;
      const float x = ok ? xp[w] : 0.0f;
      if (ok) acc[v] = (x > acc[v] || x != x) ? x : acc[v];
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (o0 + v * 256 < n2) out[plane * n2 + o0 + v * 256] = acc[v];
}

// ---- timing ----
struct timer {
  void* flush = nullptr;
  cudaEvent_t e0, e1;
  timer() {
    CK(cudaMalloc(&flush, 256 << 20));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  template <class F>
  float median_ms(F f) {
    std::vector<float> ts;
    for (int i = 0; i < 23; ++i) {
      CK(cudaMemsetAsync(flush, i, 256 << 20));
      CK(cudaEventRecord(e0));
      f();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 3) ts.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
  }
};

static bool same(const float* a, const float* b, size_t n, std::vector<float>& ha, std::vector<float>& hb) {
  ha.resize(n), hb.resize(n);
  CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
  return std::memcmp(ha.data(), hb.data(), n * 4) == 0;
}

__global__ void fill(float* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = (h & 0xffffff) / 16777216.0f;
  }
}

int main() {
  timer tm;
  std::vector<float> ha, hb;
  {
    const long long N = 112, C = 64, I = 512 * 512;
    const size_t n = (size_t)N * C * I;
    float *x, *y0, *y1;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y0, n * 4));
    CK(cudaMalloc(&y1, n * 4));
    fill<<<4096, 256>>>(x, n, 7);
    const double gb = 2.0 * n * 4 / 1e9;
    auto report = [&](const char* name, float ms, bool ok) {
      std::printf("rmsnorm %-28s %8.4f ms  %6.0f GB/s  %s\n", name, ms, gb / ms * 1e3, ok ? "same bits" : "DIFFERENT");
    };
    const long long cols = N * I;
    float ms = tm.median_ms([&] { rms_a<<<(cols + 31) / 32, 256>>>(N, C, I, x, y0); });
    report("A S8 K8 64-bit", ms, true);
#define RMS(S, K, label)                                                                              \
  ms = tm.median_ms([&] { rms_g<S, K><<<(cols + 32 * (256 / (32 * S)) - 1) / (32 * (256 / (32 * S))), 256>>>(N, C, I, x, y1); }); \
  report(label, ms, same(y0, y1, n, ha, hb));
    RMS(8, 8, "G S8 K8 32-bit");
    RMS(4, 16, "G S4 K16 (2 groups)");
    RMS(2, 32, "G S2 K32 (4 groups)");
    RMS(1, 64, "G S1 K64 (8 groups)");
    CK(cudaFree(x));
    CK(cudaFree(y0));
    CK(cudaFree(y1));
  }
  {
    const long long lines = 64 * 192, L = 65536;
    const long long OL = (L + 2 * PAD - DIL * (KT - 1) - 1) + 1;
    const size_t n = (size_t)lines * L, no = (size_t)lines * OL;
    float *x, *y0, *y1;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y0, no * 4));
    CK(cudaMalloc(&y1, no * 4));
    fill<<<4096, 256>>>(x, n, 11);
    const double gb = (n + no) * 4.0 / 1e9;
    auto report = [&](const char* name, float ms, bool ok) {
      std::printf("maxpool1d %-26s %8.4f ms  %6.0f GB/s  %s\n", name, ms, gb / ms * 1e3, ok ? "same bits" : "DIFFERENT");
    };
    const long long n3 = lines * ((OL + 3) / 4);
    float ms = tm.median_ms([&] { pool_a<<<(n3 + 255) / 256, 256>>>(x, L, OL, n3, y0); });
    report("A runs of 4 (today)", ms, true);
    ms = tm.median_ms([&] { pool_b<<<dim3((OL + 255) / 256, lines), 256>>>(x, L, OL, y1); });
    report("B thread per output 2-d", ms, same(y0, y1, no, ha, hb));
#define POOLC(V)                                                                                  \
  ms = tm.median_ms([&] { pool_c<V><<<dim3((OL + 256 * V - 1) / (256 * V), lines), 256>>>(x, L, OL, y1); }); \
  report("C smem tile V=" #V, ms, same(y0, y1, no, ha, hb));
#define POOLD(V)                                                                                  \
  ms = tm.median_ms([&] { pool_d<V><<<dim3((OL + 256 * V - 1) / (256 * V), lines), 256>>>(x, L, OL, y1); }); \
  report("D strided V=" #V, ms, same(y0, y1, no, ha, hb));
    POOLC(1) POOLC(2) POOLC(4) POOLC(8) POOLD(1) POOLD(2) POOLD(4)
  }
  return 0;
}
