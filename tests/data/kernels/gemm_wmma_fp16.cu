// C (fp32) = A (fp16, row-major) @ B (fp16, col-major) on tensor cores with WMMA:
// each warp computes one 16x16 tile of C. M, N, K must be multiples of 16.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16

extern "C" __global__ void gemm_wmma(const half* __restrict__ a, const half* __restrict__ b,
                                     float* __restrict__ c, int M, int N, int K) {
  const int warpM = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
  const int warpN = blockIdx.y * blockDim.y + threadIdx.y;

  wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> a_frag;
  wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, half, wmma::col_major> b_frag;
  wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc_frag;
  wmma::fill_fragment(acc_frag, 0.0f);

  const int aRow = warpM * WMMA_M;
  const int bCol = warpN * WMMA_N;
  for (int k = 0; k < K; k += WMMA_K) {
    wmma::load_matrix_sync(a_frag, a + aRow * K + k, K);
    wmma::load_matrix_sync(b_frag, b + bCol * K + k, K);
    wmma::mma_sync(acc_frag, a_frag, b_frag, acc_frag);
  }
  wmma::store_matrix_sync(c + aRow * N + bCol, acc_frag, N, wmma::mem_row_major);
}
