#ifndef KS_SPLIT_TF32
#define KS_SPLIT_TF32
// x's nearest TF32 value (10-bit mantissa, ties away from zero); infinities and NaN as
// they are.
__device__ __forceinline__ float ks_tf32(float x) {
  int u = __float_as_int(x);
  if ((u & 0x7f800000) != 0x7f800000) u = (u + 0x1000) & -8192;
  return __int_as_float(u);
}
#endif
