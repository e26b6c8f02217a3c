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

// softmax over the last dims; a block per row.
extern "C" __global__ void __launch_bounds__(512)
ks0_softmax(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2, long long n5, float* __restrict__ out6) {
  const long long row = blockIdx.x;
  const long long base = row * n1;
  float m = -KS_INF;
  float s = 0.0f;
  const long long c4n = (n1 & 3) == 0 ? n1 / 4 : 0;
  for (long long c4 = (int)threadIdx.x; c4 < c4n; c4 += (int)blockDim.x) {
    const float4 q = reinterpret_cast<const float4*>(in0 + base)[c4];
    { const float v = q.x; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
    { const float v = q.y; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
    { const float v = q.z; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
    { const float v = q.w; { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; } }
  }
  for (long long c = c4n * 4 + (int)threadIdx.x; c < n1; c += (int)blockDim.x) {
    const float v = in0[base + c];
    { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; }
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
    const float v = in0[base + c];
    const float red = KS_EXP(v - m) * inv;
    const long long i = base + c;
    const float xp1 = in1[c];
    const float ep2 = red * xp1;
    const float xp3 = in2[row * n5];
    const float ep4 = ep2 + xp3;
    out6[i] = ep4;
  }
}
