// Row softmax, one warp per row: lanes stride over the row and reduce with
// butterfly shuffles; no shared memory, no block barrier.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void softmax_rows_warp(const float* __restrict__ x,
                                             float* __restrict__ y,
                                             int rows, int cols) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* in = x + (long long)warp * cols;
  float* out = y + (long long)warp * cols;
  float m = -3.402823466e38f;
  for (int j = lane; j < cols; j += 32) m = fmaxf(m, in[j]);
  m = warp_max(m);
  float s = 0.0f;
  for (int j = lane; j < cols; j += 32) s += __expf(in[j] - m);
  s = warp_sum(s);
  const float inv = 1.0f / s;
  for (int j = lane; j < cols; j += 32) out[j] = __expf(in[j] - m) * inv;
}
