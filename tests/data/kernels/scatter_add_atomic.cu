// index_add: out[index[i]] += src[i]; several i may share a target, hence atomics.
extern "C" __global__ void scatter_add(const float* __restrict__ src,
                                       const int* __restrict__ index,
                                       float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&out[index[i]], src[i]);
}
