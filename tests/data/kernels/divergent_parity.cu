// Even and odd lanes take different paths: every warp executes both, serially.
extern "C" __global__ void parity_transform(const float* __restrict__ x,
                                            float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (threadIdx.x % 2 == 0) {
    y[i] = x[i] * 2.0f;
  } else {
    y[i] = sqrtf(fabsf(x[i]));
  }
}
