// Sum of n floats in two launches: the first writes one partial sum per block
// (shared-memory tree), the second reduces the partials with one block.
#define THREADS 256

extern "C" __global__ void partial_sums(const float* __restrict__ x,
                                        float* __restrict__ partial, int n) {
  __shared__ float s[THREADS];
  const int tid = threadIdx.x;
  const int i = blockIdx.x * THREADS + tid;
  s[tid] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int k = THREADS / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

extern "C" __global__ void final_sum(const float* __restrict__ partial,
                                     float* __restrict__ out, int m) {
  __shared__ float s[THREADS];
  const int tid = threadIdx.x;
  float acc = 0.0f;
  for (int i = tid; i < m; i += THREADS) acc += partial[i];
  s[tid] = acc;
  __syncthreads();
  for (int k = THREADS / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[0] = s[0];
}
