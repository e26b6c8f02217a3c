// Online softmax (one pass for max and sum together, Milakov & Gimelshein), one block
// per row; the per-thread (max, sum) pairs are merged with warp shuffles and then
// across warps through shared memory. A second pass writes the result.
struct ms {
  float m;
  float s;
};

__device__ __forceinline__ ms merge(ms a, ms b) {
  const float m = fmaxf(a.m, b.m);
  ms r;
  r.m = m;
  r.s = a.s * __expf(a.m - m) + b.s * __expf(b.m - m);
  return r;
}

extern "C" __global__ void softmax_rows_online(const float* __restrict__ x,
                                               float* __restrict__ y, int cols) {
  __shared__ float sm[32];
  __shared__ float ss[32];
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int wid = tid >> 5;
  const float* in = x + (long long)row * cols;
  float* out = y + (long long)row * cols;

  ms acc = {-3.402823466e38f, 0.0f};
  for (int j = tid; j < cols; j += blockDim.x) {
    const float v = in[j];
    const float m = fmaxf(acc.m, v);
    acc.s = acc.s * __expf(acc.m - m) + __expf(v - m);
    acc.m = m;
  }
  for (int o = 16; o > 0; o >>= 1) {
    ms other;
    other.m = __shfl_down_sync(0xffffffffu, acc.m, o);
    other.s = __shfl_down_sync(0xffffffffu, acc.s, o);
    acc = merge(acc, other);
  }
  if (lane == 0) {
    sm[wid] = acc.m;
    ss[wid] = acc.s;
  }
  __syncthreads();
  if (wid == 0) {
    const int nw = blockDim.x / 32;
    ms w = {lane < nw ? sm[lane] : -3.402823466e38f, lane < nw ? ss[lane] : 0.0f};
    for (int o = 16; o > 0; o >>= 1) {
      ms other;
      other.m = __shfl_down_sync(0xffffffffu, w.m, o);
      other.s = __shfl_down_sync(0xffffffffu, w.s, o);
      w = merge(w, other);
    }
    if (lane == 0) {
      sm[0] = w.m;
      ss[0] = w.s;
    }
  }
  __syncthreads();
  const float m = sm[0];
  const float inv = 1.0f / ss[0];
  for (int j = tid; j < cols; j += blockDim.x) out[j] = __expf(in[j] - m) * inv;
}
