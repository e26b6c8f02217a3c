// y = relu(x @ w + b) in one kernel: a 32x32 shared-memory tiled GEMM whose epilogue
// adds the bias of the column and applies ReLU before the store.
#define TS 32

extern "C" __global__ void linear_bias_relu(const float* __restrict__ x,  // [M, K]
                                            const float* __restrict__ w,  // [K, N]
                                            const float* __restrict__ bias,  // [N]
                                            float* __restrict__ y,  // [M, N]
                                            int M, int N, int K) {
  __shared__ float xs[TS][TS];
  __shared__ float ws[TS][TS];
  const int r = blockIdx.y * TS + threadIdx.y;
  const int c = blockIdx.x * TS + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    xs[threadIdx.y][threadIdx.x] =
        (r < M && k0 + threadIdx.x < K) ? x[r * K + k0 + threadIdx.x] : 0.0f;
    ws[threadIdx.y][threadIdx.x] =
        (k0 + threadIdx.y < K && c < N) ? w[(k0 + threadIdx.y) * N + c] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < TS; ++kk)
      acc = fmaf(xs[threadIdx.y][kk], ws[kk][threadIdx.x], acc);
    __syncthreads();
  }
  if (r < M && c < N) {
    const float v = acc + bias[c];
    y[r * N + c] = v > 0.0f ? v : 0.0f;
  }
}
