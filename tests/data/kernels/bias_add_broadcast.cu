// y[r, c] = x[r, c] + bias[c]: elementwise with a broadcast bias, 2-D launch.
extern "C" __global__ void bias_add(const float* __restrict__ x, const float* __restrict__ bias,
                                    float* __restrict__ y, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) y[r * cols + c] = x[r * cols + c] + bias[c];
}
