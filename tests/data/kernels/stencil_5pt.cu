// 2-D five-point Jacobi step on the interior of an H x W grid; the border is copied.
extern "C" __global__ void jacobi_5pt(const float* __restrict__ in, float* __restrict__ out,
                                      int H, int W) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= W || y >= H) return;
  const int i = y * W + x;
  if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
    out[i] = in[i];
    return;
  }
  out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - W] + in[i + W]);
}
