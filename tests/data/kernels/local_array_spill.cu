// Each thread keeps a 64-entry window of its row in a local array indexed at run
// time, which cannot live in registers: it goes to local memory.
#define WIN 64

extern "C" __global__ void running_median_like(const float* __restrict__ x,
                                               float* __restrict__ y, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float window[WIN];
  for (int j = 0; j < WIN; ++j) window[j] = 0.0f;
  float best = 0.0f;
  for (int j = 0; j < cols; ++j) {
    const float v = x[row * cols + j];
    const int slot = ((int)(v * 977.0f) & (WIN - 1));
    window[slot] += v;
    best = fmaxf(best, window[(slot + j) & (WIN - 1)]);
  }
  y[row] = best;
}
