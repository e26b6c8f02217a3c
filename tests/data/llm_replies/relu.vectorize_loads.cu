// ReLU with 128-bit accesses: each thread moves float4s in a grid-stride loop, and the
// n % 4 elements past the last float4 are done one by one.
extern "C" __global__ void __launch_bounds__(256)
relu_f32x4(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long n4 = n / 4;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (long long i = tid; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = v.x < 0.0f ? 0.0f : v.x;
    v.y = v.y < 0.0f ? 0.0f : v.y;
    v.z = v.z < 0.0f ? 0.0f : v.z;
    v.w = v.w < 0.0f ? 0.0f : v.w;
    y4[i] = v;
  }
  const long long tail = n4 * 4 + tid;
  if (tail < n) {
    const float v = x[tail];
    y[tail] = v < 0.0f ? 0.0f : v;
  }
}
