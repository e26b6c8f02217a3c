// Sum of all elements: grid-stride accumulation per thread, warp shuffle reduction,
// one atomicAdd per warp into the (zero-initialised) result.
extern "C" __global__ void reduce_sum_atomic(const float* __restrict__ x,
                                             float* __restrict__ result, long long n) {
  float s = 0.0f;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x)
    s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(result, s);
}
