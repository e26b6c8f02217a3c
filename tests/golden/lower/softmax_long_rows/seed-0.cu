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

// softmax over the last dims; a block per row; the row spread over a cluster of 4 blocks, each keeping its chunk in shared memory between the passes and reading the others' partial states from theirs.
extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(512)
ks0_softmax(long long n0, long long n1, const float* __restrict__ in0, float* __restrict__ out3) {
  const long long row = (long long)blockIdx.x / 4, part = (long long)blockIdx.x % 4;  // the cluster's rank
  const long long chunk = ((n1 + 3) / 4 + 3) / 4 * 4;
  const long long c0 = min(n1, part * chunk), c1 = min(n1, c0 + chunk), cn = c1 - c0;
  const long long base = row * n1 + c0;  // the block's chunk: base + c, 0 <= c < cn
  float m = -KS_INF;
  float s = 0.0f;
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
      m = fmaxf(m, v);
      }
      {
      const long long c = c4 * 4 + 1;
      (void)c;
      const float v = q_in0.y;
      m = fmaxf(m, v);
      }
      {
      const long long c = c4 * 4 + 2;
      (void)c;
      const float v = q_in0.z;
      m = fmaxf(m, v);
      }
      {
      const long long c = c4 * 4 + 3;
      (void)c;
      const float v = q_in0.w;
      m = fmaxf(m, v);
      }
    }
  } else {
    for (int c = (int)threadIdx.x; c < cc; c += (int)blockDim.x) {
      const float v = sh_in0[c];
      m = fmaxf(m, v);
    }
  }
  const float mref = m == -KS_INF ? 0.0f : m;
  if (v4) {
    for (int c4 = (int)threadIdx.x; c4 < cc / 4; c4 += (int)blockDim.x) {
      const float4 q_in0 = reinterpret_cast<const float4*>(sh_in0)[c4];
      float4 w_in0;
      {
      const long long c = c4 * 4 + 0;
      (void)c;
      const float v = q_in0.x;
      const float e = KS_EXP(v - mref);
      s += e;
      w_in0.x = e;
      }
      {
      const long long c = c4 * 4 + 1;
      (void)c;
      const float v = q_in0.y;
      const float e = KS_EXP(v - mref);
      s += e;
      w_in0.y = e;
      }
      {
      const long long c = c4 * 4 + 2;
      (void)c;
      const float v = q_in0.z;
      const float e = KS_EXP(v - mref);
      s += e;
      w_in0.z = e;
      }
      {
      const long long c = c4 * 4 + 3;
      (void)c;
      const float v = q_in0.w;
      const float e = KS_EXP(v - mref);
      s += e;
      w_in0.w = e;
      }
      reinterpret_cast<float4*>(sh_in0)[c4] = w_in0;
    }
  } else {
    for (int c = (int)threadIdx.x; c < cc; c += (int)blockDim.x) {
      const float v = sh_in0[c];
      const float e = KS_EXP(v - mref);
      s += e;
      sh_in0[c] = e;
    }
  }
  for (long long c = cc + (int)threadIdx.x; c < cn; c += (int)blockDim.x) {
    const float v = in0[base + c];
    { const bool up = v > m; const float e = KS_EXP(up ? m - v : v - m); s = up ? s * e + 1.0f : (v != -KS_INF ? s + e : s); m = up ? v : m; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_m = __shfl_xor_sync(0xffffffffu, m, o);
    const float o_s = __shfl_xor_sync(0xffffffffu, s, o);
    ks_ms_merge(m, s, o_m, o_s);
  }
  {
    __shared__ float sh_m[32];
    __shared__ float sh_s[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sh_m[warp] = m; sh_s[warp] = s; }
    __syncthreads();
    m = lane < (int)(blockDim.x >> 5) ? sh_m[lane] : -KS_INF;
    s = lane < (int)(blockDim.x >> 5) ? sh_s[lane] : 0.0f;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float o_m = __shfl_xor_sync(0xffffffffu, m, o);
    const float o_s = __shfl_xor_sync(0xffffffffu, s, o);
    ks_ms_merge(m, s, o_m, o_s);
  }
  if (threadIdx.x == 0) { ks_part[0] = m; ks_part[1] = s; }
  ks_cluster_sync();
  {
    const float* const p0 = ks_cluster_map(ks_part, 0);
    m = p0[0]; s = p0[1];
  }
  for (unsigned q = 1; q < 4; ++q) {
    const float* const pq = ks_cluster_map(ks_part, q);
    const float p_m = pq[0];
    const float p_s = pq[1];
    ks_ms_merge(m, s, p_m, p_s);
  }
  ks_cluster_arrive();
  const float inv = 1.0f / s;
  const float kt = KS_EXP(mref - m) * inv;  // this thread's exps, rescaled to the row's
  if (v4) {
    for (int c4 = (int)threadIdx.x; c4 < cc / 4; c4 += (int)blockDim.x) {
      const float4 q_in0 = reinterpret_cast<const float4*>(sh_in0)[c4];
      float4 o_out3;
      {
      const long long c = c4 * 4 + 0;
      (void)c;
      const float v = q_in0.x;
      o_out3.x = v * kt;
      }
      {
      const long long c = c4 * 4 + 1;
      (void)c;
      const float v = q_in0.y;
      o_out3.y = v * kt;
      }
      {
      const long long c = c4 * 4 + 2;
      (void)c;
      const float v = q_in0.z;
      o_out3.z = v * kt;
      }
      {
      const long long c = c4 * 4 + 3;
      (void)c;
      const float v = q_in0.w;
      o_out3.w = v * kt;
      }
      reinterpret_cast<float4*>(out3 + base)[c4] = o_out3;
    }
  } else {
    for (int c = (int)threadIdx.x; c < cc; c += (int)blockDim.x) {
      const float v = sh_in0[c];
      out3[base + c] = v * kt;
    }
  }
  for (long long c = cc + (int)threadIdx.x; c < cn; c += (int)blockDim.x) {
    const float v = in0[base + c];
    out3[base + c] = KS_EXP(v - m) * inv;
  }
  ks_cluster_wait();
}
