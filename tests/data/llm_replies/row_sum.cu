// Sum over the last dimension: a block of 256 threads per row. Each thread adds a
// strided slice of the row, the warps reduce with shuffles, and one float per warp
// goes through shared memory to the first warp.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(256)
row_sum_f32(const float* __restrict__ x, float* __restrict__ y, long long cols) {
  __shared__ float partials[8];
  const float* row = x + (long long)blockIdx.x * cols;
  float s = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  s = warp_sum(s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partials[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < (int)(blockDim.x >> 5) ? partials[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) y[blockIdx.x] = s;
  }
}
