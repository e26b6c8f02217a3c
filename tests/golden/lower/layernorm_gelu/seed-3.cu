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

// layer_norm over the last dims; a warp per row.
extern "C" __global__ void __launch_bounds__(256)
ks0_layer_norm(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2, float* __restrict__ out5) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= n0) return;  // the whole warp leaves together
  const long long base = row * n1;
  float s1 = 0.0f;
  float s2 = 0.0f;
    const float shift = in0[base];
  const long long c4n = (n1 & 3) == 0 ? n1 / 4 : 0;
  for (long long c4 = lane; c4 < c4n; c4 += 32) {
    const float4 q = reinterpret_cast<const float4*>(in0 + base)[c4];
    { const float v = q.x; { const float d = v - shift; s1 += d; s2 += d * d; } }
    { const float v = q.y; { const float d = v - shift; s1 += d; s2 += d * d; } }
    { const float v = q.z; { const float d = v - shift; s1 += d; s2 += d * d; } }
    { const float v = q.w; { const float d = v - shift; s1 += d; s2 += d * d; } }
  }
  for (long long c = c4n * 4 + lane; c < n1; c += 32) {
    const float v = in0[base + c];
    { const float d = v - shift; s1 += d; s2 += d * d; }
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
  for (long long c = lane; c < n1; c += 32) {
    const float v = in0[base + c];
    const float red = ((v - mean) * rstd) * in1[c] + in2[c];
    const long long i = base + c;
    const float ep1 = 0.5f * red * (1.0f + erff(red * 0.7071067811865476f));
    out5[i] = ep1;
  }
}
