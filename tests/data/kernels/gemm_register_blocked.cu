// C = A @ B, 64x64 block tiles, 8-deep k tiles, 256 threads each computing a 4x4
// register block (outer products of a column of As and a row of Bs). Assumes M, N
// multiples of 64 and K a multiple of 8 (no bounds checks).
#define BM 64
#define BN 64
#define BK 8
#define TM 4
#define TN 4

extern "C" __global__ void __launch_bounds__(256)
gemm_regblock(const float* __restrict__ A, const float* __restrict__ B,
              float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tr = tid / (BN / TN);  // 0..15: row group
  const int tc = tid % (BN / TN);  // 0..15: column group
  const int row0 = blockIdx.y * BM;
  const int col0 = blockIdx.x * BN;

  float acc[TM][TN] = {0.0f};
  float ra[TM];
  float rb[TN];

  for (int k0 = 0; k0 < K; k0 += BK) {
    // 64x8 of A and 8x64 of B: two elements each per thread.
#pragma unroll
    for (int l = 0; l < 2; ++l) {
      const int e = tid + l * 256;
      const int ar = e / BK, ac = e % BK;
      As[ac][ar] = A[(row0 + ar) * K + k0 + ac];
      const int br = e / BN, bc = e % BN;
      Bs[br][bc] = B[(k0 + br) * N + col0 + bc];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = As[k][tr * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = Bs[k][tc * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      C[(row0 + tr * TM + i) * N + col0 + tc * TN + j] = acc[i][j];
}
