// GELU through the sigmoid form x * sigmoid(1.702 x), with fast intrinsics:
// __expf and __fdividef trade accuracy for speed.
extern "C" __global__ void gelu_fast_f32(const float* __restrict__ x,
                                         float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float e = __expf(-1.702f * v);
  y[i] = __fdividef(v, 1.0f + e);
}
