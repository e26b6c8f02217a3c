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

// max_pool2d 3x3, stride 2x2, padding 1x1: a thread per output element.
extern "C" __global__ void __launch_bounds__(128)
ks0_max_pool2d(const float* __restrict__ in0, long long n1, long long n2, long long n3, long long n4, long long n5, float* __restrict__ out6) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n5) return;
  long long ow, oh, plane;
  if (n5 <= 0x7fffffffLL) {
    const unsigned u = (unsigned)t, q = u / (unsigned)n4;
    ow = u - q * (unsigned)n4; oh = q % (unsigned)n3; plane = q / (unsigned)n3;
  } else {
    ow = t % n4; oh = (t / n4) % n3; plane = t / (n4 * n3);
  }
  const float* xp = in0 + plane * n1 * n2;
  const long long h0 = oh * 2 - 1, w0 = ow * 2 - 1;
  float acc = -KS_INF;
  int count = 0;
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const long long h = h0 + i * 1;
    if (h < 0 || h >= n1) continue;
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      const long long w = w0 + j * 1;
      if (w < 0 || w >= n2) continue;
      const float v = xp[h * n2 + w];
      acc = (v > acc || v != v) ? v : acc;
      ++count;
    }
  }
  const float res = acc;
  out6[t] = res;
  (void)count;
}
