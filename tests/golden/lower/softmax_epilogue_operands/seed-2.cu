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

// softmax over the last dims; a warp per row.
extern "C" __global__ void __launch_bounds__(128)
ks0_softmax(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2, long long n5, float* __restrict__ out6) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= n0) return;  // the whole warp leaves together
  const long long base = row * n1;
  float m = -KS_INF;
  float s = 0.0f;
  for (long long c = lane; c < n1; c += 32) {
    const float v = in0[base + c];
    { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_m = __shfl_xor_sync(0xffffffffu, m, o);
    const float o_s = __shfl_xor_sync(0xffffffffu, s, o);
    ks_ms_merge(m, s, o_m, o_s);
  }
  const float inv = 1.0f / s;
  for (long long c = lane; c < n1; c += 32) {
    const float v = in0[base + c];
    const float red = KS_EXP(v - m) * inv;
    const long long i = base + c;
    const float xp1 = in1[c];
    const float ep2 = red * xp1;
    const float xp3 = in2[row * n5];
    const float ep4 = ep2 + xp3;
    out6[i] = ep4;
  }
}
