// ReLU, one element per thread: the plainest elementwise candidate, and the shape that
// every elementwise plan starts from. `v < 0 ? 0 : v` rather than fmaxf(v, 0) so that a
// NaN stays NaN, as torch.relu leaves it.
extern "C" __global__ void relu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}
