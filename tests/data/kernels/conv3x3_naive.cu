// Single-channel 3x3 convolution ("same" size, zero padding), weights in global
// memory, every tap read straight from global memory.
extern "C" __global__ void conv3x3_naive(const float* __restrict__ in,
                                         const float* __restrict__ weight,  // [3][3]
                                         float* __restrict__ out, int H, int W) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= W || y >= H) return;
  float acc = 0.0f;
  for (int dy = -1; dy <= 1; ++dy) {
    for (int dx = -1; dx <= 1; ++dx) {
      const int yy = y + dy;
      const int xx = x + dx;
      if (yy >= 0 && yy < H && xx >= 0 && xx < W)
        acc += in[yy * W + xx] * weight[(dy + 1) * 3 + (dx + 1)];
    }
  }
  out[y * W + x] = acc;
}
