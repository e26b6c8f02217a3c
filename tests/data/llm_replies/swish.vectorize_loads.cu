// Swish with float4 loads and stores in a grid-stride loop; the tail element by element.
__device__ __forceinline__ float swish(float v) { return v * (1.0f / (1.0f + expf(-v))); }

extern "C" __global__ void __launch_bounds__(256)
swish_f32x4(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long n4 = n / 4;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (long long i = tid; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = swish(v.x);
    v.y = swish(v.y);
    v.z = swish(v.z);
    v.w = swish(v.w);
    y4[i] = v;
  }
  const long long tail = n4 * 4 + tid;
  if (tail < n) y[tail] = swish(x[tail]);
}
