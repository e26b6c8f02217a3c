#pragma once
// The CUDA driver API, opened at run time (dlopen of libcuda.so.1) rather than linked,
// so that kernelskill-gpu starts on a machine without an NVIDIA driver and says why it
// cannot work there, instead of failing to load. cuda.h is included for its types
// only; no symbol of libcuda is referenced at link time.

#include <cuda.h>

#include <string>
#include <vector>

#include "base/result.hpp"
#include "model/device.hpp"

namespace ks {

class cuda_driver {
 public:
  // Opens the driver once per process and calls cuInit(0). On failure the message
  // says what is missing (no libcuda.so.1, the toolkit's stub library, no device, …).
  // The returned pointer lives until the process exits.
  static result<const cuda_driver*> load();

  // Turns a CUresult into "cuFoo: CUDA_ERROR_X (description)".
  std::string describe(CUresult rc, const char* call) const;
  // status::success() for CUDA_SUCCESS, else an error with describe()'s text.
  status check(CUresult rc, const char* call) const;

  int version = 0;  // cuDriverGetVersion, e.g. 13000

  // Entry points, named as in cuda.h (versioned names resolve through its macros).
#define KS_CUDA_ENTRY(fn) decltype(&::fn) fn = nullptr;
  KS_CUDA_ENTRY(cuInit)
  KS_CUDA_ENTRY(cuDriverGetVersion)
  KS_CUDA_ENTRY(cuGetErrorName)
  KS_CUDA_ENTRY(cuGetErrorString)
  KS_CUDA_ENTRY(cuDeviceGetCount)
  KS_CUDA_ENTRY(cuDeviceGet)
  KS_CUDA_ENTRY(cuDeviceGetName)
  KS_CUDA_ENTRY(cuDeviceGetAttribute)
  KS_CUDA_ENTRY(cuDeviceTotalMem)
  KS_CUDA_ENTRY(cuDevicePrimaryCtxRetain)
  KS_CUDA_ENTRY(cuDevicePrimaryCtxRelease)
  KS_CUDA_ENTRY(cuCtxSetCurrent)
  KS_CUDA_ENTRY(cuCtxSynchronize)
  KS_CUDA_ENTRY(cuMemGetInfo)
  KS_CUDA_ENTRY(cuModuleLoadData)
  KS_CUDA_ENTRY(cuModuleUnload)
  KS_CUDA_ENTRY(cuModuleGetFunction)
  KS_CUDA_ENTRY(cuFuncGetAttribute)
  KS_CUDA_ENTRY(cuFuncSetAttribute)
  KS_CUDA_ENTRY(cuLaunchKernel)
  // For the reviewer (gpu/reviewer.cpp): streams, events, memsets.
  KS_CUDA_ENTRY(cuCtxGetCurrent)
  KS_CUDA_ENTRY(cuStreamSynchronize)
  KS_CUDA_ENTRY(cuEventCreate)
  KS_CUDA_ENTRY(cuEventDestroy)
  KS_CUDA_ENTRY(cuEventRecord)
  KS_CUDA_ENTRY(cuEventSynchronize)
  KS_CUDA_ENTRY(cuEventElapsedTime)
  KS_CUDA_ENTRY(cuMemsetD8Async)
  KS_CUDA_ENTRY(cuMemsetD32Async)
#undef KS_CUDA_ENTRY

 private:
  cuda_driver() = default;
  void* handle_ = nullptr;
};

// The devices the driver sees, with compute capability, memory and SM count.
result<std::vector<device_info>> query_devices(const cuda_driver& drv);

// Errors after which the context can no longer be used (CUDA's "sticky" errors: an
// illegal address, a trap, a failed launch, …); every other error leaves it usable.
bool poisons_context(CUresult rc);

}  // namespace ks
