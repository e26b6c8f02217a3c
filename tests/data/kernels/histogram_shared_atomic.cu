// 256-bin histogram of bytes: per-block histogram in shared memory with shared
// atomics, merged into the global histogram with one atomic per bin and block.
#define NBINS 256

extern "C" __global__ void histogram256(const unsigned char* __restrict__ data,
                                        unsigned int* __restrict__ hist, int n) {
  __shared__ unsigned int local_hist[NBINS];
  for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local_hist[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const unsigned int bin = data[i];
    atomicAdd(&local_hist[bin], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < NBINS; b += blockDim.x) atomicAdd(&hist[b], local_hist[b]);
}
