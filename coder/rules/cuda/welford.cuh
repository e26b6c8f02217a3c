__device__ __forceinline__ void ks_wf_merge(float& n, float& m, float& m2, float nb, float mb, float m2b) {
  const float N = n + nb;
  if (N == 0.0f) return;
  const float d = mb - m;
  m = (__fmul_rn(n, m) + __fmul_rn(nb, mb)) / N;
  m2 = (m2 + m2b) + d * d * (__fmul_rn(n, nb) / N);
  n = N;
}
