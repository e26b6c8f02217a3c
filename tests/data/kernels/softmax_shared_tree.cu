// Row softmax, one block of 256 threads per row: each thread strides over the row,
// then the block reduces max and sum through a shared-memory tree.
#define BLOCK 256

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_rows_shared(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float red[BLOCK];
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  const float* in = x + (long long)row * cols;
  float* out = y + (long long)row * cols;

  float m = -3.402823466e38f;
  for (int j = tid; j < cols; j += blockDim.x) m = fmaxf(m, in[j]);
  red[tid] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();

  float sum = 0.0f;
  for (int j = tid; j < cols; j += blockDim.x) sum += expf(in[j] - m);
  red[tid] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  for (int j = tid; j < cols; j += blockDim.x) out[j] = expf(in[j] - m) * inv;
}
