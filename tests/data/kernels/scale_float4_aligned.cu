// y = alpha * x. Takes the float4 path only when both pointers are 16-byte aligned and
// n is a multiple of 4; otherwise falls back to scalar accesses.
extern "C" __global__ void scale_f32(const float* __restrict__ x,
                                     float* __restrict__ y,
                                     float alpha,
                                     int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool aligned = ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(y)) & 15) == 0;
  if (aligned && (n % 4) == 0) {
    if (i < n / 4) {
      const float4 v = *reinterpret_cast<const float4*>(&x[4 * i]);
      float4 r;
      r.x = alpha * v.x;
      r.y = alpha * v.y;
      r.z = alpha * v.z;
      r.w = alpha * v.w;
      *reinterpret_cast<float4*>(&y[4 * i]) = r;
    }
  } else {
    for (int j = i; j < n; j += blockDim.x * gridDim.x) {
      y[j] = alpha * x[j];
    }
  }
}
