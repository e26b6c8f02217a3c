// Single-channel 3x3 convolution with a shared-memory input tile: a 16x16 block loads
// an 18x18 tile (with a one-pixel halo) cooperatively, then every output reads its
// nine taps from shared memory. Weights live in constant memory.
#define T 16
#define R 1

__constant__ float c_weight[9];

extern "C" __global__ void conv3x3_tiled(const float* __restrict__ in,
                                         float* __restrict__ out, int H, int W) {
  __shared__ float tile[T + 2 * R][T + 2 * R];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int x0 = blockIdx.x * T - R;
  const int y0 = blockIdx.y * T - R;
  for (int i = ty; i < T + 2 * R; i += blockDim.y) {
    for (int j = tx; j < T + 2 * R; j += blockDim.x) {
      const int gy = y0 + i, gx = x0 + j;
      tile[i][j] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? in[gy * W + gx] : 0.0f;
    }
  }
  __syncthreads();
  const int x = blockIdx.x * T + tx;
  const int y = blockIdx.y * T + ty;
  if (x >= W || y >= H) return;
  float acc = 0.0f;
#pragma unroll
  for (int dy = 0; dy < 3; ++dy)
#pragma unroll
    for (int dx = 0; dx < 3; ++dx) acc += tile[ty + dy][tx + dx] * c_weight[dy * 3 + dx];
  out[y * W + x] = acc;
}
