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

// layer_norm over the last dims; a block per row.
extern "C" __global__ void __launch_bounds__(1024)
ks0_layer_norm(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2, float* __restrict__ out5) {
  const long long row = blockIdx.x;
  const long long base = row * n1;
  float s1 = 0.0f;
  float s2 = 0.0f;
    const float shift = in0[base];
  for (long long c = (int)threadIdx.x; c < n1; c += (int)blockDim.x) {
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
  const float mean_d = s1 / (float)n1;
  const float mean = shift + mean_d;
  const float var = fmaxf(s2 / (float)n1 - mean_d * mean_d, 0.0f);
  const float rstd = rsqrtf(var + (1e-05f));
  for (long long c = (int)threadIdx.x; c < n1; c += (int)blockDim.x) {
    const float v = in0[base + c];
    out5[base + c] = ((v - mean) * rstd) * in1[c] + in2[c];
  }
}
