// LibTorch's CUDA half (c10_cuda) is only in a CUDA build of LibTorch: compiled where
// the build has it (KS_TORCH_CUDA, gpu/CMakeLists.txt), and checked to compile
// everywhere, as graph_replay.cpp is.
#include "gpu/device_memory.hpp"

#if KS_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace ks {

#if KS_TORCH_CUDA

uint64_t cached_device_bytes() {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  // StatType::AGGREGATE (every pool), the first entry; the enum moved namespaces
  // between LibTorch versions (c10::CachingDeviceAllocator in 2.6 and later).
  constexpr size_t agg = 0;
  const int64_t reserved = stats.reserved_bytes[agg].current, allocated = stats.allocated_bytes[agg].current;
  return reserved > allocated ? static_cast<uint64_t>(reserved - allocated) : 0;
}

void release_cached_device_memory() { c10::cuda::CUDACachingAllocator::emptyCache(); }

#else

uint64_t cached_device_bytes() { return 0; }
void release_cached_device_memory() {}

#endif

}  // namespace ks
