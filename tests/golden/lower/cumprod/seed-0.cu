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

// cumprod along the last dim: a warp per row.
extern "C" __global__ void __launch_bounds__(256)
ks0_cumprod(long long n0, long long n1, const float* __restrict__ in0, float* __restrict__ out3) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= n0) return;  // the whole warp leaves together
  const float* xr = in0 + row * n1;
  float* yr = out3 + row * n1;
  float carry = 1.0f;
  for (long long t0 = 0; t0 < n1; t0 += 128) {
    const long long c0 = t0 + lane * 4;
    float v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = c0 + q < n1 ? xr[c0 + q] : 1.0f;
#pragma unroll
    for (int q = 1; q < 4; ++q) v[q] = v[q - 1] * v[q];
    float s = v[3];
    for (int o = 1; o < 32; o <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s = up * s;
    }
    float before = __shfl_up_sync(0xffffffffu, s, 1);
    if (lane == 0) before = 1.0f;
    before = carry * before;
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (c0 + q < n1) yr[c0 + q] = (float)(before * v[q]);
    carry = carry * __shfl_sync(0xffffffffu, s, 31);
  }
}
