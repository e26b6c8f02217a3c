#pragma once
// Static analysis of CUDA source for the feature extractor: per function (kernels and
// device helpers), what it reads and writes, how its loops are shaped, which variables
// derive from the thread index, and what that implies (pointwise, k-loop, stencil,
// shared tiles, reductions, reuse). docs/features.md describes every heuristic and its
// blind spots; this header only lists the facts it produces.

#include <array>
#include <map>
#include <string>
#include <vector>

#include "features/cuda_syntax.hpp"

namespace ks::features {

// What is known about a launch of a kernel (from a resolved plan).
struct launch_info {
  std::array<long long, 3> grid{0, 0, 0};
  std::array<long long, 3> block{0, 0, 0};
  std::map<std::string, long long> int_params;  // kernel parameter name → value
};

// Facts about one function (a kernel or a __device__ helper).
struct unit_facts {
  std::string name;
  bool is_kernel = false;
  bool global_write = false;  // stores (not atomics) to global memory
  bool pointwise = false;     // see docs/features.md, is_pointwise
  bool cross_thread_reduction = false;
  bool serial_reduction = false;  // a thread loops over data accumulating into a scalar
  bool shared_tiles = false;
  bool shared_used = false;  // declares or accesses shared memory
  bool k_loop = false;
  bool gemm_like = false;  // a k-loop whose operands span different output dims
  bool naive_gemm = false;
  bool half_operands = false;  // the GEMM operands are fp16/bf16
  bool stencil = false;
  bool irregular = false;  // data-dependent indexing
  bool bounds_check = false;
  bool tail = false;
  bool align_checked = false;
  bool grid_stride = false;
  bool vector_access = false;  // a global access through a wider type than the element
  bool vector_load = false;    // ... of >= 64 bits, read
  bool vector_store = false;   // ... of >= 64 bits, written
  int vector_width = 1;        // widest global access, in elements of the pointee
  int unrolled = 0;
  int divergent = 0;
  double reuse = 1;
  long long local_array_bytes = 0;  // local arrays indexed at run time (local memory)
};

// Token-level facts over the bodies of all functions.
struct lexical_facts {
  int transcendental = 0;
  bool fast_math = false;
  int shuffles = 0;
  bool shuffle_reduction = false;  // __shfl_xor/down/up (accumulation across lanes)
  int atomics = 0;
  bool reduce_intrinsics = false;  // __reduce_*_sync, cg::reduce
  int syncthreads = 0;
  bool shared_decl = false;
  bool tensor_cores = false;
  bool vector_types = false;
};

struct source_facts {
  std::vector<unit_facts> units;  // functions with bodies, in source order
  lexical_facts lex;
};

// nominal_extent: the size assumed for a problem dimension when no resolved plan says
// it (reuse of GEMM operands is proportional to it).
source_facts analyze_source(const parsed_source& ps, const std::map<std::string, launch_info>& launches,
                            double nominal_extent);

}  // namespace ks::features
