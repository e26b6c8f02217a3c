// out = in^T for a rows x cols matrix: reads are coalesced, writes are strided.
extern "C" __global__ void transpose_naive(const float* __restrict__ in,
                                           float* __restrict__ out, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
