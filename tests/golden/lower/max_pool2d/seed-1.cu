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

// max_pool2d 3x3, stride 2x2, padding 1x1: a block per tile of 512 outputs of a line along the last dim, their 1025 inputs along it read into shared memory once, coalesced.
extern "C" __global__ void __launch_bounds__(256)
ks0_max_pool2d(const float* __restrict__ in0, long long n1, long long n2, long long n3, long long n4, float* __restrict__ out5) {
  const long long segs = (n4 + 512 - 1) / 512;
  const long long line = (long long)blockIdx.x / segs, o0 = ((long long)blockIdx.x - line * segs) * 512;
  long long rest = line;
  const long long oh = rest % n3;
  rest /= n3;
  const long long plane = rest;
  const float* xp = in0 + plane * n1 * n2;
  const long long h0 = oh * 2 - 1;
  __shared__ float sh[1025];
  const long long wb = o0 * 2 - 1;  // the input position of sh[0]
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
    __syncthreads();  // the tile of the tap before is read
    for (int e = threadIdx.x; e < 1025; e += 256) {
      const long long w = wb + e;
      sh[e] = w >= 0 && w < n2 ? xp[h * n2 + w] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int v = 0; v < 2; ++v) {
#pragma unroll
      for (int l = 0; l < 3; ++l) {
        const int s = ((int)threadIdx.x + v * 256) * 2 + l * 1;
        const long long w = wb + s;
        if (w < 0 || w >= n2) continue;
        acc[v] = (sh[s] > acc[v] || sh[s] != sh[s]) ? sh[s] : acc[v];
        ++count[v];
      }
    }
  }
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    const long long ov = o0 + threadIdx.x + v * 256;
    if (ov >= n4) break;
    const long long tv = line * n4 + ov;
    const float res = acc[v];
    out5[tv] = res;
  }
  (void)count;
}
