// Swish (SiLU): y = x * sigmoid(x), one element per thread, in one pass over memory
// where eager PyTorch makes two (sigmoid, then the product).
extern "C" __global__ void swish_f32(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = v * (1.0f / (1.0f + expf(-v)));
  }
}
