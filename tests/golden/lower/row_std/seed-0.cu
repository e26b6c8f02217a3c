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

// std over the last dims; a block per row.
extern "C" __global__ void __launch_bounds__(256)
ks0_std(long long n0, long long n1, const float* __restrict__ in0, float* __restrict__ out3) {
  const long long row = blockIdx.x;
  const long long base = row * n1;
  float s1 = 0.0f;
  float s2 = 0.0f;
    const float shift = in0[base];
  const long long c4n = (n1 & 3) == 0 ? n1 / 4 : 0;
  for (long long c4 = (int)threadIdx.x; c4 < c4n; c4 += (int)blockDim.x) {
    const float4 q = reinterpret_cast<const float4*>(in0 + base)[c4];
    { const float v = q.x; { const float d = v - shift; s1 += d; s2 += d * d; } }
    { const float v = q.y; { const float d = v - shift; s1 += d; s2 += d * d; } }
    { const float v = q.z; { const float d = v - shift; s1 += d; s2 += d * d; } }
    { const float v = q.w; { const float d = v - shift; s1 += d; s2 += d * d; } }
  }
  for (long long c = c4n * 4 + (int)threadIdx.x; c < n1; c += (int)blockDim.x) {
    const float v = in0[base + c];
    { const float d = v - shift; s1 += d; s2 += d * d; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_s1 = __shfl_xor_sync(0xffffffffu, s1, o);
    const float o_s2 = __shfl_xor_sync(0xffffffffu, s2, o);
    s1 += o_s1; s2 += o_s2;
  }
  {
    __shared__ float sh_s1[32];
    __shared__ float sh_s2[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sh_s1[warp] = s1; sh_s2[warp] = s2; }
    __syncthreads();
    s1 = lane < (int)(blockDim.x >> 5) ? sh_s1[lane] : 0.0f;
    s2 = lane < (int)(blockDim.x >> 5) ? sh_s2[lane] : 0.0f;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_s1 = __shfl_xor_sync(0xffffffffu, s1, o);
    const float o_s2 = __shfl_xor_sync(0xffffffffu, s2, o);
    s1 += o_s1; s2 += o_s2;
  }
  if ((int)threadIdx.x == 0) out3[row] = sqrtf(fmaxf(s2 - s1 * s1 / (float)n1, 0.0f) / (float)(n1 - (1.0f)));
}
