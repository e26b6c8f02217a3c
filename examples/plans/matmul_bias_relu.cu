// The epilogue of y = relu(x @ w + b), after the product has been computed by a library
// step (cuBLAS through aten::matmul): adds the bias along the columns and applies ReLU.
// A 2-D launch: threadIdx.x walks columns, so that a warp reads consecutive floats.
extern "C" __global__ void bias_relu_f32(const float* __restrict__ prod,  // [rows, cols]
                                         const float* __restrict__ bias,  // [cols]
                                         float* __restrict__ y,           // [rows, cols]
                                         long long rows, long long cols) {
  const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long r = (long long)blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) {
    const float v = prod[r * cols + c] + bias[c];
    y[r * cols + c] = v < 0.0f ? 0.0f : v;
  }
}
