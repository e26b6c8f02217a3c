// ReLU four floats at a time; the last n % 4 elements are done one by one by the
// first threads. Assumes 16-byte aligned x and y (fresh allocations are), no check.
extern "C" __global__ void relu_f32x4(const float* __restrict__ x,
                                      float* __restrict__ y,
                                      long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long n4 = n / 4;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    v.x = fmaxf(v.x, 0.0f);
    v.y = fmaxf(v.y, 0.0f);
    v.z = fmaxf(v.z, 0.0f);
    v.w = fmaxf(v.w, 0.0f);
    reinterpret_cast<float4*>(y)[i] = v;
  }
  // Tail: n % 4 leftovers.
  const long long t = n4 * 4 + i;
  if (i < n - n4 * 4) {
    y[t] = fmaxf(x[t], 0.0f);
  }
}
