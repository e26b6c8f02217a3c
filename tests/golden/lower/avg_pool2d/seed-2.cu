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

// avg_pool2d 3x3, stride 2x2, padding 1x1: a thread per 4 consecutive outputs along the last dim, their 9 inputs along it loaded once.
extern "C" __global__ void __launch_bounds__(512)
ks0_avg_pool2d(const float* __restrict__ in0, long long n1, long long n2, long long n3, long long n4, long long n5, float* __restrict__ out6) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n5) return;
  const long long OL = (n4 + 3) / 4;  // runs of 4 a line
  long long ow, oh, plane, line;  // line: the run's line of outputs, t / OL
  if (n5 <= 0x7fffffffLL) {
    const unsigned u = (unsigned)t, q = u / (unsigned)OL;
    ow = u - q * (unsigned)OL; oh = q % (unsigned)n3; plane = q / (unsigned)n3; line = q;
  } else {
    ow = t % OL; line = t / OL; oh = (t / OL) % n3; plane = t / (OL * n3);
  }
  ow *= 4;  // the run's first output
  const float* xp = in0 + plane * n1 * n2;
  const long long h0 = oh * 2 - 1, w0 = ow * 2 - 1;
  float acc[4];
  int count[4];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    acc[v] = 0.0f;
    count[v] = 0;
  }
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const long long h = h0 + i * 1;
    if (h < 0 || h >= n1) continue;
    float xs[9];
    bool ok[9];
#pragma unroll
    for (int s = 0; s < 9; ++s) {
      const long long w = w0 + s;
      ok[s] = w >= 0 && w < n2;
      xs[s] = ok[s] ? xp[h * n2 + w] : 0.0f;
    }
#pragma unroll
    for (int v = 0; v < 4; ++v) {
#pragma unroll
      for (int l = 0; l < 3; ++l) {
        const int s = v * 2 + l * 1;
        if (!ok[s]) continue;
        acc[v] += xs[s];
        ++count[v];
      }
    }
  }
  const long long he = min(h0 + 3, n1 + 1);
  const long long tv0 = line * n4 + ow;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    if (ow + v >= n4) break;
    const long long tv = tv0 + v;
    const long long w0v = w0 + v * 2, wev = min(w0v + 3, n2 + 1);
    const float res = acc[v] / (float)((he - h0) * (wev - w0v));
    out6[tv] = res;
  }
  (void)count;
}
