// Softmax over the last dimension, one block per row. The row is cached in dynamic
// shared memory, so global memory is read once and written once; the max and the sum
// are block reductions (warp shuffles, then one float per warp in shared memory).
//
// Dynamic shared memory: (cols + blockDim.x / 32) floats. blockDim.x must be a
// multiple of 32, at most 1024.

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Reduces v over the block; every thread gets the result. `partials` holds one float
// per warp and is free again when this returns.
template <bool IsMax>
__device__ float block_reduce(float v, float* partials) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = IsMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  const float identity = IsMax ? __int_as_float(0xff800000) : 0.0f;  // -inf or 0
  v = lane < warps ? partials[lane] : identity;
  v = IsMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // partials is reused by the next reduction
  return v;
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_rows_f32(const float* __restrict__ x, float* __restrict__ y,
                 long long rows, int cols) {
  extern __shared__ float smem[];
  float* row = smem;             // cols floats
  float* partials = smem + cols;  // blockDim.x / 32 floats
  const long long r = blockIdx.x;
  if (r >= rows) return;  // the whole block leaves together
  const float* xr = x + r * cols;
  float* yr = y + r * cols;

  float m = __int_as_float(0xff800000);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = xr[c];
    row[c] = v;
    m = fmaxf(m, v);
  }
  m = block_reduce<true>(m, partials);

  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = expf(row[c] - m);
    row[c] = e;
    s += e;
  }
  s = block_reduce<false>(s, partials);

  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = row[c] * inv;
}
