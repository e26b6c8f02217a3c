// Row sums with four independent accumulators per thread, so that four loads are in
// flight at once rather than one add waiting on the last; then as before.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(256)
row_sum_f32_acc4(const float* __restrict__ x, float* __restrict__ y, long long cols) {
  __shared__ float partials[8];
  const float* row = x + (long long)blockIdx.x * cols;
  const long long step = blockDim.x;
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  long long c = threadIdx.x;
  for (; c + 3 * step < cols; c += 4 * step) {
    a0 += row[c];
    a1 += row[c + step];
    a2 += row[c + 2 * step];
    a3 += row[c + 3 * step];
  }
  for (; c < cols; c += step) a0 += row[c];
  float s = warp_sum((a0 + a1) + (a2 + a3));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partials[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < (int)(blockDim.x >> 5) ? partials[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) y[blockIdx.x] = s;
  }
}
