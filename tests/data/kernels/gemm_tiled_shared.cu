// C = A @ B with 16x16 shared-memory tiles: each block stages a tile of A and of B,
// synchronises, and every thread reuses the tiles for 16 multiply-adds.
#define TILE 16

extern "C" __global__ void gemm_tiled(const float* __restrict__ A,
                                      const float* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    const int ak = t * TILE + tx;
    const int bk = t * TILE + ty;
    As[ty][tx] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
    Bs[ty][tx] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
