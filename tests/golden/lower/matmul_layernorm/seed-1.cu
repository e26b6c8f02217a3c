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

#ifndef KS_SPLIT_TF32
#define KS_SPLIT_TF32
// x's nearest TF32 value (10-bit mantissa, ties away from zero); infinities and NaN as
// they are.
__device__ __forceinline__ float ks_tf32(float x) {
  int u = __float_as_int(x);
  if ((u & 0x7f800000) != 0x7f800000) u = (u + 0x1000) & -8192;
  return __int_as_float(u);
}
#endif
// Split-precision operand A of a 3xTF32 product (coder/rules/split_tf32.hpp): x = big +
// small, both TF32, written as [big | small | big] along K.
extern "C" __global__ void __launch_bounds__(256)
ks0_split_a(const float* __restrict__ in0, float* __restrict__ out1, long long n2, long long n3) {
  const long long step = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool vec = (n3 & 3) == 0 && ((reinterpret_cast<unsigned long long>(in0) | reinterpret_cast<unsigned long long>(out1)) & 15) == 0;
  for (long long r = blockIdx.y; r < n2; r += gridDim.y) {
    const float* src = in0 + r * n3;
    float* dst = out1 + r * 3 * n3;
    if (vec) {
      for (long long t = first * 4; t < n3; t += step * 4) {
        const float4 x = *reinterpret_cast<const float4*>(src + t);
        float4 big, small;
        big.x = ks_tf32(x.x); small.x = ks_tf32(x.x - big.x);
        big.y = ks_tf32(x.y); small.y = ks_tf32(x.y - big.y);
        big.z = ks_tf32(x.z); small.z = ks_tf32(x.z - big.z);
        big.w = ks_tf32(x.w); small.w = ks_tf32(x.w - big.w);
        *reinterpret_cast<float4*>(dst + t) = big;
        *reinterpret_cast<float4*>(dst + n3 + t) = small;
        *reinterpret_cast<float4*>(dst + 2 * n3 + t) = big;
      }
    } else {
      for (long long t = first; t < n3; t += step) {
        const float x = src[t];
        const float big = ks_tf32(x), small = ks_tf32(x - big);
        dst[t] = big;
        dst[n3 + t] = small;
        dst[2 * n3 + t] = big;
      }
    }
  }
}

// Split-precision operand B of a 3xTF32 product (coder/rules/split_tf32.hpp): x = big +
// small, both TF32, written as [small | big | big] along K.
extern "C" __global__ void __launch_bounds__(256)
ks0_split_b(const float* __restrict__ in0, float* __restrict__ out1, long long n2, long long n3) {
  const long long step = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool vec = (n3 & 3) == 0 && ((reinterpret_cast<unsigned long long>(in0) | reinterpret_cast<unsigned long long>(out1)) & 15) == 0;
  for (long long r = blockIdx.y; r < n2; r += gridDim.y) {
    const float* src = in0 + r * n3;
    float* dst = out1 + r * 3 * n3;
    if (vec) {
      for (long long t = first * 4; t < n3; t += step * 4) {
        const float4 x = *reinterpret_cast<const float4*>(src + t);
        float4 big, small;
        big.x = ks_tf32(x.x); small.x = ks_tf32(x.x - big.x);
        big.y = ks_tf32(x.y); small.y = ks_tf32(x.y - big.y);
        big.z = ks_tf32(x.z); small.z = ks_tf32(x.z - big.z);
        big.w = ks_tf32(x.w); small.w = ks_tf32(x.w - big.w);
        *reinterpret_cast<float4*>(dst + t) = small;
        *reinterpret_cast<float4*>(dst + n3 + t) = big;
        *reinterpret_cast<float4*>(dst + 2 * n3 + t) = big;
      }
    } else {
      for (long long t = first; t < n3; t += step) {
        const float x = src[t];
        const float big = ks_tf32(x), small = ks_tf32(x - big);
        dst[t] = small;
        dst[n3 + t] = big;
        dst[2 * n3 + t] = big;
      }
    }
  }
}

// layer_norm over the last dims; a block per row.
extern "C" __global__ void __launch_bounds__(512)
ks1_layer_norm(long long n0, long long n1, const float* __restrict__ in0, float* __restrict__ out3) {
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
  const float mean_d = s1 / (float)n1;
  const float mean = shift + mean_d;
  const float var = fmaxf(s2 / (float)n1 - mean_d * mean_d, 0.0f);
  const float rstd = rsqrtf(var + (1e-05f));
  for (long long c4 = (int)threadIdx.x; c4 < c4n; c4 += (int)blockDim.x) {
    const float4 q = reinterpret_cast<const float4*>(in0 + base)[c4];
    float4 o4;
    { const long long c = c4 * 4 + 0; (void)c; const float v = q.x; o4.x = (v - mean) * rstd; }
    { const long long c = c4 * 4 + 1; (void)c; const float v = q.y; o4.y = (v - mean) * rstd; }
    { const long long c = c4 * 4 + 2; (void)c; const float v = q.z; o4.z = (v - mean) * rstd; }
    { const long long c = c4 * 4 + 3; (void)c; const float v = q.w; o4.w = (v - mean) * rstd; }
    reinterpret_cast<float4*>(out3 + base)[c4] = o4;
  }
  for (long long c = c4n * 4 + (int)threadIdx.x; c < n1; c += (int)blockDim.x) {
    const float v = in0[base + c];
    out3[base + c] = (v - mean) * rstd;
  }
}
