// LayerNorm over the last dimension, one warp per row, Welford's algorithm for the
// mean and variance (numerically stable in one pass), merged across lanes with
// shuffles; a second pass normalises with gamma and beta.
__device__ __forceinline__ void welford_merge(float& mean, float& m2, float& count,
                                              float mean_b, float m2_b, float count_b) {
  const float n = count + count_b;
  if (n == 0.0f) return;
  const float delta = mean_b - mean;
  const float frac = count_b / n;
  mean += delta * frac;
  m2 += m2_b + delta * delta * count * frac;
  count = n;
}

extern "C" __global__ void layernorm_welford(const float* __restrict__ x,
                                             const float* __restrict__ gamma,
                                             const float* __restrict__ beta,
                                             float* __restrict__ y,
                                             int rows, int cols, float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* in = x + (long long)row * cols;
  float mean = 0.0f, m2 = 0.0f, count = 0.0f;
  for (int j = lane; j < cols; j += 32) {
    const float v = in[j];
    count += 1.0f;
    const float delta = v - mean;
    mean += delta / count;
    m2 += delta * (v - mean);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float mb = __shfl_xor_sync(0xffffffffu, mean, o);
    const float m2b = __shfl_xor_sync(0xffffffffu, m2, o);
    const float cb = __shfl_xor_sync(0xffffffffu, count, o);
    welford_merge(mean, m2, count, mb, m2b, cb);
  }
  const float rstd = rsqrtf(m2 / cols + eps);
  float* out = y + (long long)row * cols;
  for (int j = lane; j < cols; j += 32)
    out[j] = (in[j] - mean) * rstd * gamma[j] + beta[j];
}
