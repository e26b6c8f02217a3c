// GELU (the exact erf form, torch.nn.functional.gelu's default), four floats per
// thread through float4 loads and stores, with a grid-stride loop so that the grid can
// be capped. The float4 casts assume x and y are 16-byte aligned, which fresh PyTorch
// tensors and plan buffers are; the last n % 4 elements are done one by one.
__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
}

extern "C" __global__ void __launch_bounds__(256)
gelu_f32x4(const float* __restrict__ x,   // n floats
           float* __restrict__ y,         // n floats
           long long n) {
  const long long n4 = n / 4;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (long long i = tid; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = gelu(v.x);
    v.y = gelu(v.y);
    v.z = gelu(v.z);
    v.w = gelu(v.w);
    y4[i] = v;
  }
  const long long tail = n4 * 4 + tid;  // n % 4 < 4 <= threads of the first block
  if (tail < n) y[tail] = gelu(x[tail]);
}
