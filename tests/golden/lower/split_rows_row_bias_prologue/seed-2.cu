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

// softmax over the last dims of few long rows, first pass: each row split over SPLIT1 blocks, each block reduces its chunk into a partial state (with the feeding chain fused into its loads).
extern "C" __global__ void __launch_bounds__(1024)
ks1_softmax_part(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, long long n4, long long n5, float* __restrict__ out6) {
  const long long parts = n5;
  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;
  const long long base = row * n1;
  const long long chunk = ((n1 + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned
  const long long c0 = part * chunk, c1 = min(n1, c0 + chunk);
  float m = -KS_INF;
  float s = 0.0f;
  for (long long c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
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
  if (threadIdx.x == 0) { out6[0 * n0 * parts + blockIdx.x] = m; out6[1 * n0 * parts + blockIdx.x] = s; }
}

// softmax over the last dims of few long rows, second pass: each of a row's SPLIT1 blocks merges the row's partial states in order, then normalises its chunk.
extern "C" __global__ void __launch_bounds__(1024)
ks1_softmax(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, long long n4, float* __restrict__ out5, const float* __restrict__ in3, long long n7) {
  const long long parts = n7;
  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;
  const long long base = row * n1;
  const long long chunk = ((n1 + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned
  const long long c0 = part * chunk, c1 = min(n1, c0 + chunk);
  float m = -KS_INF;
  float s = 0.0f;
  for (long long q = (long long)threadIdx.x; q < n7; q += (long long)blockDim.x) {
    const float p_m = in3[0 * n0 * n7 + row * n7 + q];
    const float p_s = in3[1 * n0 * n7 + row * n7 + q];
    ks_ms_merge(m, s, p_m, p_s);
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
  for (long long c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
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
