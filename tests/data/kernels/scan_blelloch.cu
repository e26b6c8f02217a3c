// Exclusive prefix sum of one block of 2 * blockDim.x elements (Blelloch's work-
// efficient scan): up-sweep, clear the last element, down-sweep, in shared memory.
extern "C" __global__ void scan_blelloch(const float* __restrict__ in,
                                         float* __restrict__ out, int n) {
  extern __shared__ float temp[];
  const int thid = threadIdx.x;
  int offset = 1;
  temp[2 * thid] = 2 * thid < n ? in[2 * thid] : 0.0f;
  temp[2 * thid + 1] = 2 * thid + 1 < n ? in[2 * thid + 1] : 0.0f;
  for (int d = n >> 1; d > 0; d >>= 1) {
    __syncthreads();
    if (thid < d) {
      const int ai = offset * (2 * thid + 1) - 1;
      const int bi = offset * (2 * thid + 2) - 1;
      temp[bi] += temp[ai];
    }
    offset *= 2;
  }
  if (thid == 0) temp[n - 1] = 0.0f;
  for (int d = 1; d < n; d *= 2) {
    offset >>= 1;
    __syncthreads();
    if (thid < d) {
      const int ai = offset * (2 * thid + 1) - 1;
      const int bi = offset * (2 * thid + 2) - 1;
      const float t = temp[ai];
      temp[ai] = temp[bi];
      temp[bi] += t;
    }
  }
  __syncthreads();
  if (2 * thid < n) out[2 * thid] = temp[2 * thid];
  if (2 * thid + 1 < n) out[2 * thid + 1] = temp[2 * thid + 1];
}
