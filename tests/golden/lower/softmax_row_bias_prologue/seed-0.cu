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

// softmax over the last dims, with the feeding elementwise chain fused into its loads; a block per row; the row kept in registers between the passes.
extern "C" __global__ void __launch_bounds__(256)
ks1_softmax(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, long long n4, float* __restrict__ out5) {
  const long long row = blockIdx.x;
  const long long base = row * n1;
  float m = -KS_INF;
  float s = 0.0f;
  float rc_in0[4];
  float rv[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long c = (int)threadIdx.x + (long long)k * (int)blockDim.x;
    if (c < n1) {
    const long long i = base + c;
    rc_in0[k] = in0[i];
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long c = (int)threadIdx.x + (long long)k * (int)blockDim.x;
    if (c < n1) {
    const long long i = base + c;
    (void)i;
    const float x0 = rc_in0[k];
    const float x1 = in1[row * n4];
    const float e2 = x0 + x1;
    const float v = e2;
    rv[k] = v;
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long c = (int)threadIdx.x + (long long)k * (int)blockDim.x;
    if (c < n1) {
    m = fmaxf(m, rv[k]);
    }
  }
  const float mref = m == -KS_INF ? 0.0f : m;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long c = (int)threadIdx.x + (long long)k * (int)blockDim.x;
    if (c < n1) {
    rv[k] = KS_EXP(rv[k] - mref);
    s += rv[k];
    }
  }
  for (long long c = (int)threadIdx.x + (long long)4 * (int)blockDim.x; c < n1; c += (int)blockDim.x) {
    float v;
    {
    const long long i = base + c;
    const float x0 = in0[i];
    const float x1 = in1[row * n4];
    const float e2 = x0 + x1;
    v = e2;
    }
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
  const float kt = KS_EXP(mref - m) * inv;  // this thread's exps, rescaled to the row's
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long c = (int)threadIdx.x + (long long)k * (int)blockDim.x;
    if (c < n1) {
    const float v = rv[k];
    out5[base + c] = v * kt;
    }
  }
  for (long long c = (int)threadIdx.x + (long long)4 * (int)blockDim.x; c < n1; c += (int)blockDim.x) {
    float v;
    {
    const long long i = base + c;
    const float x0 = in0[i];
    const float x1 = in1[row * n4];
    const float e2 = x0 + x1;
    v = e2;
    }
    out5[base + c] = KS_EXP(v - m) * inv;
  }
}
