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

// softmax over the last dims, with the feeding elementwise chain fused into its loads; a block per row.
extern "C" __global__ void __launch_bounds__(512)
ks2_softmax(long long n0, long long n1, const float* __restrict__ in0, float* __restrict__ out3) {
  const long long row = blockIdx.x;
  const long long base = row * n1;
  float m = -KS_INF;
  float s = 0.0f;
  {
  long long c = (int)threadIdx.x;
  for (; c + 3 * (int)blockDim.x < n1; c += 4 * (int)blockDim.x) {
    float v0;
    {
    const long long i = base + c;
    const float x0 = in0[i];
    const float e1 = x0 * (0.0883883476f);
    v0 = e1;
    }
    float v1;
    {
    const long long i = base + c + 1 * (int)blockDim.x;
    const float x0 = in0[i];
    const float e1 = x0 * (0.0883883476f);
    v1 = e1;
    }
    float v2;
    {
    const long long i = base + c + 2 * (int)blockDim.x;
    const float x0 = in0[i];
    const float e1 = x0 * (0.0883883476f);
    v2 = e1;
    }
    float v3;
    {
    const long long i = base + c + 3 * (int)blockDim.x;
    const float x0 = in0[i];
    const float e1 = x0 * (0.0883883476f);
    v3 = e1;
    }
    { const float v = v0; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
    { const float v = v1; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
    { const float v = v2; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
    { const float v = v3; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
  }
  for (; c < n1; c += (int)blockDim.x) {
    float v;
    {
    const long long i = base + c;
    const float x0 = in0[i];
    const float e1 = x0 * (0.0883883476f);
    v = e1;
    }
    { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; }
  }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_m = __shfl_xor_sync(0xffffffffu, m, o);
    const float o_s = __shfl_xor_sync(0xffffffffu, s, o);
    ks_ms_merge(m, s, o_m, o_s);
  }
  {
    __shared__ float sh_m[32];
    __shared__ float sh_s[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sh_m[warp] = m; sh_s[warp] = s; }
    __syncthreads();
    m = lane < (int)(blockDim.x >> 5) ? sh_m[lane] : -KS_INF;
    s = lane < (int)(blockDim.x >> 5) ? sh_s[lane] : 0.0f;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_m = __shfl_xor_sync(0xffffffffu, m, o);
    const float o_s = __shfl_xor_sync(0xffffffffu, s, o);
    ks_ms_merge(m, s, o_m, o_s);
  }
  const float inv = 1.0f / s;
  for (long long c = (int)threadIdx.x; c < n1; c += (int)blockDim.x) {
    float v;
    {
    const long long i = base + c;
    const float x0 = in0[i];
    const float e1 = x0 * (0.0883883476f);
    v = e1;
    }
    out3[base + c] = KS_EXP(v - m) * inv;
  }
}
