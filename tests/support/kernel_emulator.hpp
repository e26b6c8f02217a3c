#pragma once
// A CPU emulator for the simple CUDA that the rules coder writes, so that tests on a
// machine without a GPU can run candidates against the LibTorch reference: the source
// is compiled by the host C++ compiler with a shim (blockIdx/threadIdx, __syncthreads,
// __shfl_xor_sync, static __shared__, KS_DYNAMIC_SHARED, float4, the intrinsics it
// uses), and each block runs as blockDim.x fibers on one OS thread, one block after
// another (a cluster's blocks in turn up to each barrier across the cluster, with
// distributed shared memory between them). Test-only: it knows only the CUDA subset
// those templates use.

#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks::test {

class emulated_module {
 public:
  // Compiles `source` (with a launcher for every extern "C" kernel) into a shared
  // object under `work_dir` and loads it.
  static result<std::unique_ptr<emulated_module>> build(const std::string& source,
                                                        const std::filesystem::path& work_dir);
  ~emulated_module();
  // Launches `kernel` over `grid` x `block` with `shared_bytes` of dynamic shared
  // memory (KS_DYNAMIC_SHARED); args[k] points at parameter k's value (a pointer
  // parameter: at the pointer). A write past the dynamic shared memory is an error.
  status launch(const std::string& kernel, std::array<int64_t, 3> grid, std::array<int64_t, 3> block,
                int64_t shared_bytes, std::vector<void*> args);

 private:
  void* handle_ = nullptr;
};

}  // namespace ks::test
