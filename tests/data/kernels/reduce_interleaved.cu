// Block sum with interleaved addressing (the first kernel of Harris's reduction
// series): `tid % (2 * s) == 0` leaves most lanes of each warp idle and divergent.
extern "C" __global__ void reduce_interleaved(const float* __restrict__ in,
                                              float* __restrict__ out, int n) {
  extern __shared__ float sdata[];
  const unsigned int tid = threadIdx.x;
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
