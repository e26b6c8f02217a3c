#define KS_EXP expf
#define KS_DIV(a, b) ((a) / (b))
// Written by KernelSkill's rules coder from the reference's TorchScript graph.
#define KS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ void ks_ms_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -KS_INF) return;  // both empty: exp(-inf - -inf) would be NaN
  s = s * KS_EXP(m - M) + s2 * KS_EXP(m2 - M);
  m = M;
}

// softmax over a middle dim; each output's column in slices, a warp per slice and a lane per output, read twice.
extern "C" __global__ void __launch_bounds__(512)
ks0_softmax(long long n0, long long n1, long long n2, const float* __restrict__ in0, float* __restrict__ out4) {
  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
  const long long t = (long long)blockIdx.x * 32 + lane;
  const bool live = t < n0 * n2;
  long long o = 0, j = 0;
  if (live) {
    if (n0 * n2 <= 0x7fffffffLL) {
      const unsigned q = (unsigned)t / (unsigned)n2;
      o = q, j = (unsigned)t - q * (unsigned)n2;
    } else {
      o = t / n2, j = t % n2;
    }
  }
  const long long base = o * n1 * n2 + j;
  float m = -KS_INF;
  float s = 0.0f;
  if (live) {
#pragma unroll 4
    for (long long c = slice + (long long)0 * 16; c < n1; c += 16) {
    const float v = in0[base + c * n2];
    { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; }
    }
  }
  __shared__ float sh_m[16][33];
  __shared__ float sh_s[16][33];
  sh_m[slice][lane] = m;
  sh_s[slice][lane] = s;
  __syncthreads();
  m = -KS_INF;
  s = 0.0f;
  for (int q = 0; q < 16; ++q) {
    const float p_m = sh_m[q][lane];
    const float p_s = sh_s[q][lane];
    ks_ms_merge(m, s, p_m, p_s);
  }
  if (!live) return;
  const float inv = 1.0f / s;
    for (long long c = slice + (long long)0 * 16; c < n1; c += 16) {
    const float v = in0[base + c * n2];
    out4[base + c * n2] = KS_EXP(v - m) * inv;
    }
}
