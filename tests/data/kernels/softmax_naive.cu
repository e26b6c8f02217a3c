// Row softmax, one thread per row, three passes over the row: max, sum, write.
extern "C" __global__ void softmax_rows_naive(const float* __restrict__ x,
                                              float* __restrict__ y,
                                              int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* in = x + (long long)row * cols;
  float* out = y + (long long)row * cols;
  float m = -3.402823466e38f;
  for (int j = 0; j < cols; ++j) m = fmaxf(m, in[j]);
  float sum = 0.0f;
  for (int j = 0; j < cols; ++j) sum += expf(in[j] - m);
  for (int j = 0; j < cols; ++j) out[j] = expf(in[j] - m) / sum;
}
