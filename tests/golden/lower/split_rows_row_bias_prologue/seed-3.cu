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

// Fused elementwise chain: add. 1 floats per vector, 1 vector(s) per thread per trip, grid-stride.
extern "C" __global__ void __launch_bounds__(128)
ks0_elementwise(long long n0, const float* __restrict__ in0, const float* __restrict__ in1, long long n3, long long n4, float* __restrict__ out5) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long j = tid; j < n0; j += stride * 1) {
#pragma unroll
  for (int u = 0; u < 1; ++u) {
    const long long i = j + u * stride;
    if (i >= n0) break;
    const float x0 = in0[i];
    const float x1 = in1[(i / n3) * n4];
    const float e2 = x0 + x1;
    out5[i] = e2;
  }
  }
}

// softmax over the last dims of few long rows, first pass: each row split over SPLIT1 blocks, each block reduces its chunk into a partial state.
extern "C" __global__ void __launch_bounds__(128)
ks1_softmax_part(long long n0, long long n1, const float* __restrict__ in0, long long n3, float* __restrict__ out4) {
  const long long parts = n3;
  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;
  const long long base = row * n1;
  const long long chunk = ((n1 + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned
  const long long c0 = part * chunk, c1 = min(n1, c0 + chunk);
  float m = -KS_INF;
  float s = 0.0f;
  for (long long c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
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
  if (threadIdx.x == 0) { out4[0 * n0 * parts + blockIdx.x] = m; out4[1 * n0 * parts + blockIdx.x] = s; }
}

// softmax over the last dims of few long rows, second pass: each of a row's SPLIT1 blocks merges the row's partial states in order, then normalises its chunk.
extern "C" __global__ void __launch_bounds__(128)
ks1_softmax(long long n0, long long n1, const float* __restrict__ in0, float* __restrict__ out3, const float* __restrict__ in2, long long n5) {
  const long long parts = n5;
  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;
  const long long base = row * n1;
  const long long chunk = ((n1 + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned
  const long long c0 = part * chunk, c1 = min(n1, c0 + chunk);
  float m = -KS_INF;
  float s = 0.0f;
  for (long long q = (long long)threadIdx.x; q < n5; q += (long long)blockDim.x) {
    const float p_m = in2[0 * n0 * n5 + row * n5 + q];
    const float p_s = in2[1 * n0 * n5 + row * n5 + q];
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
    const float v = in0[base + c];
    out3[base + c] = KS_EXP(v - m) * inv;
  }
}
