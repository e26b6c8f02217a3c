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

// softmax over a middle dim; a thread per output.
extern "C" __global__ void __launch_bounds__(512)
ks0_softmax(long long n0, long long n1, long long n2, const float* __restrict__ in0, float* __restrict__ out4) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n0 * n2) return;
  const long long o = t / n2, j = t % n2;
  const long long base = o * n1 * n2 + j;
  float m = -KS_INF;
  float s = 0.0f;
  for (long long c = 0; c < n1; ++c) {
    const float v = in0[base + c * n2];
    if (v > m) { s = s * KS_EXP(m - v) + 1.0f; m = v; } else if (v != -KS_INF) { s += KS_EXP(v - m); }
  }
  const float inv = 1.0f / s;
  for (long long c = 0; c < n1; ++c) {
    const float v = in0[base + c * n2];
    out4[base + c * n2] = KS_EXP(v - m) * inv;
  }
}
