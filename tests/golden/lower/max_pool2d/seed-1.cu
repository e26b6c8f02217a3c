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

// max_pool2d 3x3, stride 2x2, padding 1x1: a thread per 2 consecutive outputs along the last dim, their 5 inputs along it loaded once.
extern "C" __global__ void __launch_bounds__(256)
ks0_max_pool2d(const float* __restrict__ in0, long long n1, long long n2, long long n3, long long n4, long long n5, float* __restrict__ out6) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n5) return;
  const long long OL = (n4 + 1) / 2;  // runs of 2 a line
  long long ow, oh, plane, line;  // line: the run's line of outputs, t / OL
  if (n5 <= 0x7fffffffLL) {
    const unsigned u = (unsigned)t, q = u / (unsigned)OL;
    ow = u - q * (unsigned)OL; oh = q % (unsigned)n3; plane = q / (unsigned)n3; line = q;
  } else {
    ow = t % OL; line = t / OL; oh = (t / OL) % n3; plane = t / (OL * n3);
  }
  ow *= 2;  // the run's first output
  const float* xp = in0 + plane * n1 * n2;
  const long long h0 = oh * 2 - 1, w0 = ow * 2 - 1;
  float acc[2];
  int count[2];
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    acc[v] = -KS_INF;
    count[v] = 0;
  }
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const long long h = h0 + i * 1;
    if (h < 0 || h >= n1) continue;
    float xs[5];
    bool ok[5];
#pragma unroll
    for (int s = 0; s < 5; ++s) {
      const long long w = w0 + s;
      ok[s] = w >= 0 && w < n2;
      xs[s] = ok[s] ? xp[h * n2 + w] : 0.0f;
    }
#pragma unroll
    for (int v = 0; v < 2; ++v) {
#pragma unroll
      for (int l = 0; l < 3; ++l) {
        const int s = v * 2 + l * 1;
        if (!ok[s]) continue;
        acc[v] = (xs[s] > acc[v] || xs[s] != xs[s]) ? xs[s] : acc[v];
        ++count[v];
      }
    }
  }
  const long long tv0 = line * n4 + ow;
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    if (ow + v >= n4) break;
    const long long tv = tv0 + v;
    const float res = acc[v];
    out6[tv] = res;
  }
  (void)count;
}
