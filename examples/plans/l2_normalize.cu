// y = x / max(||x||_2, 1e-12) over the whole tensor, in two deterministic passes (no
// atomics, so that two runs give bit-identical results):
//   sum_squares_f32: block b writes the sum of squares of its grid-stride share to
//                    partial[b];
//   scale_f32:       every block adds the partials up in the same order, then scales
//                    its elements.
#include <cuda/std/cstdint>

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets it.
__device__ float block_sum(float v) {
  __shared__ float partials[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? partials[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

extern "C" __global__ void sum_squares_f32(const float* __restrict__ x,
                                           float* __restrict__ partial,  // [gridDim.x]
                                           int64_t n) {
  float s = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    s += v * v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" __global__ void scale_f32(const float* __restrict__ x,
                                     const float* __restrict__ partial, int parts,
                                     float* __restrict__ y, int64_t n) {
  float s = 0.0f;
  for (int p = threadIdx.x; p < parts; p += blockDim.x) s += partial[p];
  s = block_sum(s);
  const float inv = 1.0f / fmaxf(sqrtf(s), 1e-12f);
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * inv;
}
