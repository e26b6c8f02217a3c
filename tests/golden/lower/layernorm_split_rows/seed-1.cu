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

__device__ __forceinline__ void ks_wf_merge(float& n, float& m, float& m2, float nb, float mb, float m2b) {
  const float N = n + nb;
  if (N == 0.0f) return;
  const float d = mb - m;
  m = (__fmul_rn(n, m) + __fmul_rn(nb, mb)) / N;
  m2 = (m2 + m2b) + d * d * (__fmul_rn(n, nb) / N);
  n = N;
}

// layer_norm over the last dims of few long rows, first pass: each row split over SPLIT0 blocks, each block reduces its chunk into a partial state.
extern "C" __global__ void __launch_bounds__(512)
ks0_layer_norm_part(long long n0, long long n1, const float* __restrict__ in0, long long n3, float* __restrict__ out4) {
  const long long parts = n3;
  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;
  const long long base = row * n1;
  const long long chunk = ((n1 + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned
  const long long c0 = part * chunk, c1 = min(n1, c0 + chunk);
  float wn = 0.0f;
  float wm = 0.0f;
  float w2 = 0.0f;
  const long long c4n = (n1 & 3) == 0 ? c1 / 4 : c0 / 4;
#pragma unroll 4
  for (long long c4 = c0 / 4 + threadIdx.x; c4 < c4n; c4 += blockDim.x) {
    const float4 q = reinterpret_cast<const float4*>(in0 + base)[c4];
    { const float v = q.x; { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); } }
    { const float v = q.y; { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); } }
    { const float v = q.z; { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); } }
    { const float v = q.w; { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); } }
  }
  for (long long c = c4n * 4 + threadIdx.x; c < c1; c += blockDim.x) {
    const float v = in0[base + c];
    { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_wn = __shfl_xor_sync(0xffffffffu, wn, o);
    const float o_wm = __shfl_xor_sync(0xffffffffu, wm, o);
    const float o_w2 = __shfl_xor_sync(0xffffffffu, w2, o);
    ks_wf_merge(wn, wm, w2, o_wn, o_wm, o_w2);
  }
  {
    __shared__ float sh_wn[32];
    __shared__ float sh_wm[32];
    __shared__ float sh_w2[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sh_wn[warp] = wn; sh_wm[warp] = wm; sh_w2[warp] = w2; }
    __syncthreads();
    wn = lane < (int)(blockDim.x >> 5) ? sh_wn[lane] : 0.0f;
    wm = lane < (int)(blockDim.x >> 5) ? sh_wm[lane] : 0.0f;
    w2 = lane < (int)(blockDim.x >> 5) ? sh_w2[lane] : 0.0f;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_wn = __shfl_xor_sync(0xffffffffu, wn, o);
    const float o_wm = __shfl_xor_sync(0xffffffffu, wm, o);
    const float o_w2 = __shfl_xor_sync(0xffffffffu, w2, o);
    ks_wf_merge(wn, wm, w2, o_wn, o_wm, o_w2);
  }
  if (threadIdx.x == 0) { out4[0 * n0 * parts + blockIdx.x] = wn; out4[1 * n0 * parts + blockIdx.x] = wm; out4[2 * n0 * parts + blockIdx.x] = w2; }
}

// layer_norm over the last dims of few long rows, second pass: each of a row's SPLIT0 blocks merges the row's partial states in order, then normalises its chunk.
extern "C" __global__ void __launch_bounds__(512)
ks0_layer_norm(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2, float* __restrict__ out5, const float* __restrict__ in4, long long n7) {
  const long long parts = n7;
  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;
  const long long base = row * n1;
  const long long chunk = ((n1 + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned
  const long long c0 = part * chunk, c1 = min(n1, c0 + chunk);
  float wn = 0.0f;
  float wm = 0.0f;
  float w2 = 0.0f;
  for (long long q = (long long)threadIdx.x; q < n7; q += (long long)blockDim.x) {
    const float p_wn = in4[0 * n0 * n7 + row * n7 + q];
    const float p_wm = in4[1 * n0 * n7 + row * n7 + q];
    const float p_w2 = in4[2 * n0 * n7 + row * n7 + q];
    ks_wf_merge(wn, wm, w2, p_wn, p_wm, p_w2);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_wn = __shfl_xor_sync(0xffffffffu, wn, o);
    const float o_wm = __shfl_xor_sync(0xffffffffu, wm, o);
    const float o_w2 = __shfl_xor_sync(0xffffffffu, w2, o);
    ks_wf_merge(wn, wm, w2, o_wn, o_wm, o_w2);
  }
  {
    __shared__ float sh_wn[32];
    __shared__ float sh_wm[32];
    __shared__ float sh_w2[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sh_wn[warp] = wn; sh_wm[warp] = wm; sh_w2[warp] = w2; }
    __syncthreads();
    wn = lane < (int)(blockDim.x >> 5) ? sh_wn[lane] : 0.0f;
    wm = lane < (int)(blockDim.x >> 5) ? sh_wm[lane] : 0.0f;
    w2 = lane < (int)(blockDim.x >> 5) ? sh_w2[lane] : 0.0f;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_wn = __shfl_xor_sync(0xffffffffu, wn, o);
    const float o_wm = __shfl_xor_sync(0xffffffffu, wm, o);
    const float o_w2 = __shfl_xor_sync(0xffffffffu, w2, o);
    ks_wf_merge(wn, wm, w2, o_wn, o_wm, o_w2);
  }
  const float mean = wm;
  const float var = fmaxf(w2 / (float)n1, 0.0f);
  const float rstd = rsqrtf(var + (1e-05f));
  const long long c4n = (n1 & 3) == 0 ? c1 / 4 : c0 / 4;
#pragma unroll 4
  for (long long c4 = c0 / 4 + threadIdx.x; c4 < c4n; c4 += blockDim.x) {
    const float4 q = reinterpret_cast<const float4*>(in0 + base)[c4];
    float4 o4;
    const float4 w4 = reinterpret_cast<const float4*>(in1)[c4];
    const float4 b4 = reinterpret_cast<const float4*>(in2)[c4];
    { const long long c = c4 * 4 + 0; (void)c; const float v = q.x; o4.x = ((v - mean) * rstd) * w4.x + b4.x; }
    { const long long c = c4 * 4 + 1; (void)c; const float v = q.y; o4.y = ((v - mean) * rstd) * w4.y + b4.y; }
    { const long long c = c4 * 4 + 2; (void)c; const float v = q.z; o4.z = ((v - mean) * rstd) * w4.z + b4.z; }
    { const long long c = c4 * 4 + 3; (void)c; const float v = q.w; o4.w = ((v - mean) * rstd) * w4.w + b4.w; }
    reinterpret_cast<float4*>(out5 + base)[c4] = o4;
  }
  for (long long c = c4n * 4 + threadIdx.x; c < c1; c += blockDim.x) {
    const float v = in0[base + c];
    out5[base + c] = ((v - mean) * rstd) * in1[c] + in2[c];
  }
}
