// Scales n floats, four consecutive elements per thread and iteration spelled out by
// hand (a manually unrolled grid-stride loop), then a scalar remainder loop for the
// one thread whose group of four straddles n.
extern "C" __global__ void scale_unrolled(const float* __restrict__ x, float* __restrict__ y,
                                          float alpha, int n) {
  const int stride = blockDim.x * gridDim.x * 4;
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  for (; i + 3 < n; i += stride) {
    y[i] = alpha * x[i];
    y[i + 1] = alpha * x[i + 1];
    y[i + 2] = alpha * x[i + 2];
    y[i + 3] = alpha * x[i + 3];
  }
  for (; i < n; ++i) y[i] = alpha * x[i];
}
