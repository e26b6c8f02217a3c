// Embedding lookup: out[i, :] = table[idx[i], :], one thread per output element.
extern "C" __global__ void gather_rows(const float* __restrict__ table,
                                       const long long* __restrict__ idx,
                                       float* __restrict__ out, int n, int dim) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n * dim) return;
  const int i = t / dim;
  const int d = t % dim;
  const long long row = idx[i];
  out[t] = table[row * dim + d];
}
