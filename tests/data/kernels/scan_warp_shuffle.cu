// Inclusive prefix sum within each warp (Kogge-Stone with __shfl_up_sync); the
// per-warp totals go to a second array for a later pass.
extern "C" __global__ void warp_scan(const int* __restrict__ in, int* __restrict__ out,
                                     int* __restrict__ warp_totals, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x & 31;
  int v = i < n ? in[i] : 0;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += up;
  }
  if (i < n) out[i] = v;
  if (lane == 31) warp_totals[i / 32] = v;
}
