#define KS_EXP expf
#define KS_DIV(a, b) ((a) / (b))
// Written by KernelSkill's rules coder from the reference's TorchScript graph.
#define KS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ void ks_ms_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -KS_INF) return;  // both empty: exp(-inf - -inf) would be NaN
  s = s * KS_EXP(m - M) + s2 * KS_EXP(m2 - M);
  m = M;
}

__device__ __forceinline__ void ks_wf_merge(float& n, float& m, float& m2, float nb, float mb, float m2b) {
  const float N = n + nb;
  if (N == 0.0f) return;
  const float d = mb - m;
  m = (__fmul_rn(n, m) + __fmul_rn(nb, mb)) / N;
  m2 = (m2 + m2b) + d * d * (__fmul_rn(n, nb) / N);
  n = N;
}

#ifndef KS_DYNAMIC_SHARED
#define KS_DYNAMIC_SHARED(name) extern __shared__ float4 name[]
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ void ks_cp_async16(float* d, const float* s) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(d)), "l"(s));
}
__device__ __forceinline__ void ks_cp_async4(float* d, const float* s) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((unsigned)__cvta_generic_to_shared(d)), "l"(s));
}
__device__ __forceinline__ void ks_cp_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#else
__device__ __forceinline__ void ks_cp_async16(float* d, const float* s) {
  *reinterpret_cast<float4*>(d) = *reinterpret_cast<const float4*>(s);
}
__device__ __forceinline__ void ks_cp_async4(float* d, const float* s) { *d = *s; }
__device__ __forceinline__ void ks_cp_async_wait() {}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void ks_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ks_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void ks_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ __forceinline__ const float* ks_cluster_map(const float* p, unsigned rank) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(r) : "l"(p), "r"(rank));
  return reinterpret_cast<const float*>(r);
}
#elif !defined(KS_CLUSTER_EMULATED)
__device__ void ks_cluster_sync();
__device__ void ks_cluster_arrive();
__device__ void ks_cluster_wait();
__device__ const float* ks_cluster_map(const float* p, unsigned rank);
#endif

// layer_norm over the last dims; a block per row; the row spread over a cluster of 4 blocks, each keeping its chunk in shared memory between the passes and reading the others' partial states from theirs.
extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(512)
ks0_layer_norm(long long n0, long long n1, const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2, float* __restrict__ out5) {
  const long long row = (long long)blockIdx.x / 4, part = (long long)blockIdx.x % 4;  // the cluster's rank
  const long long chunk = ((n1 + 3) / 4 + 3) / 4 * 4;
  const long long c0 = min(n1, part * chunk), c1 = min(n1, c0 + chunk), cn = c1 - c0;
  const long long base = row * n1 + c0;  // the block's chunk: base + c, 0 <= c < cn
  float wn = 0.0f;
  float wm = 0.0f;
  float w2 = 0.0f;
  KS_DYNAMIC_SHARED(ks_row);
  const int cc = (int)(cn < 16384 ? cn : 16384);
  const bool v4 = (n1 & 3) == 0;  // rows 16-byte aligned: float4 copies, loads and stores
  float* const ks_part = reinterpret_cast<float*>(ks_row);
  float* const sh_in0 = reinterpret_cast<float*>(ks_row) + 4 + 0 * cc;
  if (v4) {
    for (int c4 = (int)threadIdx.x; c4 < cc / 4; c4 += (int)blockDim.x) {
      ks_cp_async16(sh_in0 + c4 * 4, in0 + base + c4 * 4);
    }
  } else {
    for (int c = (int)threadIdx.x; c < cc; c += (int)blockDim.x) {
      ks_cp_async4(sh_in0 + c, in0 + base + c);
    }
  }
  ks_cp_async_wait();
  if (v4) {
    for (int c4 = (int)threadIdx.x; c4 < cc / 4; c4 += (int)blockDim.x) {
      const float4 q_in0 = reinterpret_cast<const float4*>(sh_in0)[c4];
      {
      const long long c = c4 * 4 + 0;
      (void)c;
      const float v = q_in0.x;
      { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
      }
      {
      const long long c = c4 * 4 + 1;
      (void)c;
      const float v = q_in0.y;
      { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
      }
      {
      const long long c = c4 * 4 + 2;
      (void)c;
      const float v = q_in0.z;
      { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
      }
      {
      const long long c = c4 * 4 + 3;
      (void)c;
      const float v = q_in0.w;
      { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
      }
    }
  } else {
    for (int c = (int)threadIdx.x; c < cc; c += (int)blockDim.x) {
      const float v = sh_in0[c];
      { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
    }
  }
  for (long long c = cc + (int)threadIdx.x; c < cn; c += (int)blockDim.x) {
    const float v = in0[base + c];
    { wn += 1.0f; const float d = v - wm; wm += __fdividef(d, wn); w2 += d * (v - wm); }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_wn = __shfl_xor_sync(0xffffffffu, wn, o);
    const float o_wm = __shfl_xor_sync(0xffffffffu, wm, o);
    const float o_w2 = __shfl_xor_sync(0xffffffffu, w2, o);
    ks_wf_merge(wn, wm, w2, o_wn, o_wm, o_w2);
  }
  {
    __shared__ float sh_wn[32];
    __shared__ float sh_wm[32];
    __shared__ float sh_w2[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sh_wn[warp] = wn; sh_wm[warp] = wm; sh_w2[warp] = w2; }
    __syncthreads();
    wn = lane < (int)(blockDim.x >> 5) ? sh_wn[lane] : 0.0f;
    wm = lane < (int)(blockDim.x >> 5) ? sh_wm[lane] : 0.0f;
    w2 = lane < (int)(blockDim.x >> 5) ? sh_w2[lane] : 0.0f;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_wn = __shfl_xor_sync(0xffffffffu, wn, o);
    const float o_wm = __shfl_xor_sync(0xffffffffu, wm, o);
    const float o_w2 = __shfl_xor_sync(0xffffffffu, w2, o);
    ks_wf_merge(wn, wm, w2, o_wn, o_wm, o_w2);
  }
  if (threadIdx.x == 0) { ks_part[0] = wn; ks_part[1] = wm; ks_part[2] = w2; }
  ks_cluster_sync();
  {
    const float* const p0 = ks_cluster_map(ks_part, 0);
    wn = p0[0]; wm = p0[1]; w2 = p0[2];
  }
  for (unsigned q = 1; q < 4; ++q) {
    const float* const pq = ks_cluster_map(ks_part, q);
    const float p_wn = pq[0];
    const float p_wm = pq[1];
    const float p_w2 = pq[2];
    ks_wf_merge(wn, wm, w2, p_wn, p_wm, p_w2);
  }
  ks_cluster_arrive();
  const float mean = wm;
  const float var = fmaxf(w2 / (float)n1, 0.0f);
  const float rstd = rsqrtf(var + (1e-05f));
  if (v4) {
    for (int c4 = (int)threadIdx.x; c4 < cc / 4; c4 += (int)blockDim.x) {
      const float4 q_in0 = reinterpret_cast<const float4*>(sh_in0)[c4];
      float4 o_out5;
      {
      const long long c = c4 * 4 + 0;
      (void)c;
      const float v = q_in0.x;
      o_out5.x = ((v - mean) * rstd) * in1[c0 + c] + in2[c0 + c];
      }
      {
      const long long c = c4 * 4 + 1;
      (void)c;
      const float v = q_in0.y;
      o_out5.y = ((v - mean) * rstd) * in1[c0 + c] + in2[c0 + c];
      }
      {
      const long long c = c4 * 4 + 2;
      (void)c;
      const float v = q_in0.z;
      o_out5.z = ((v - mean) * rstd) * in1[c0 + c] + in2[c0 + c];
      }
      {
      const long long c = c4 * 4 + 3;
      (void)c;
      const float v = q_in0.w;
      o_out5.w = ((v - mean) * rstd) * in1[c0 + c] + in2[c0 + c];
      }
      reinterpret_cast<float4*>(out5 + base)[c4] = o_out5;
    }
  } else {
    for (int c = (int)threadIdx.x; c < cc; c += (int)blockDim.x) {
      const float v = sh_in0[c];
      out5[base + c] = ((v - mean) * rstd) * in1[c0 + c] + in2[c0 + c];
    }
  }
  for (long long c = cc + (int)threadIdx.x; c < cn; c += (int)blockDim.x) {
    const float v = in0[base + c];
    out5[base + c] = ((v - mean) * rstd) * in1[c0 + c] + in2[c0 + c];
  }
  ks_cluster_wait();
}
