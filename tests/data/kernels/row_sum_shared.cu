// Sum of each row, one block per row: threads stride over the row, the block reduces
// through a shared-memory tree, thread 0 writes the row's sum.
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ out,
                                   int cols) {
  extern __shared__ float partial[];
  const int tid = threadIdx.x;
  const float* in = x + (long long)blockIdx.x * cols;
  float s = 0.0f;
  for (int j = tid; j < cols; j += blockDim.x) s += in[j];
  partial[tid] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = partial[0];
}
