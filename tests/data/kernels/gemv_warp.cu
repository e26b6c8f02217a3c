// y = A @ x for a rows x cols matrix, one warp per row: lanes stride over the row
// accumulating a dot product, then reduce with shuffles.
extern "C" __global__ void gemv_warp(const float* __restrict__ A, const float* __restrict__ x,
                                     float* __restrict__ y, int rows, int cols) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  float acc = 0.0f;
  for (int k = lane; k < cols; k += 32) acc += A[(long long)row * cols + k] * x[k];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) y[row] = acc;
}
