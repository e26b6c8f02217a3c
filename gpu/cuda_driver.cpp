#include "gpu/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace ks {

namespace {

#define KS_STR2(x) #x
#define KS_STR(x) KS_STR2(x)  // expands cuda.h's versioning macros first

template <class Fn>
bool resolve(void* handle, Fn& slot, const char* symbol, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!slot) {
    if (!missing.empty()) missing += ", ";
    missing += symbol;
  }
  return slot != nullptr;
}

result<const cuda_driver*> open_driver(cuda_driver* drv, void*& handle) {
  handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return ks::error{std::string("no CUDA driver on this machine: libcuda.so.1 could not be "
                                 "loaded (") +
                     (why ? why : "unknown reason") +
                     "). Install the NVIDIA driver, or run kernelskill-gpu on a machine "
                     "with a GPU and point the daemon at it (gpus.remote in the config)."};
  }
  std::string missing;
#define KS_RESOLVE(fn) resolve(handle, drv->fn, KS_STR(fn), missing);
#define KS_RESOLVE2(fn, name) resolve(handle, drv->fn, name, missing);
  KS_RESOLVE(cuInit)
  KS_RESOLVE(cuDriverGetVersion)
  KS_RESOLVE(cuGetErrorName)
  KS_RESOLVE(cuGetErrorString)
  KS_RESOLVE(cuDeviceGetCount)
  KS_RESOLVE(cuDeviceGet)
  KS_RESOLVE(cuDeviceGetName)
  KS_RESOLVE(cuDeviceGetAttribute)
  KS_RESOLVE(cuDeviceTotalMem)
  KS_RESOLVE(cuDevicePrimaryCtxRetain)
  KS_RESOLVE(cuDevicePrimaryCtxRelease)
  KS_RESOLVE(cuCtxSetCurrent)
  KS_RESOLVE(cuCtxSynchronize)
  KS_RESOLVE(cuMemGetInfo)
  KS_RESOLVE(cuModuleLoadData)
  KS_RESOLVE(cuModuleUnload)
  KS_RESOLVE(cuModuleGetFunction)
  KS_RESOLVE(cuFuncGetAttribute)
  KS_RESOLVE(cuFuncSetAttribute)
  KS_RESOLVE(cuLaunchKernel)
  KS_RESOLVE(cuCtxGetCurrent)
  KS_RESOLVE(cuStreamSynchronize)
  KS_RESOLVE(cuEventCreate)
  KS_RESOLVE(cuEventDestroy)
  KS_RESOLVE(cuEventRecord)
  KS_RESOLVE(cuEventSynchronize)
  // cuEventElapsedTime_v2 (what CUDA 13's cuda.h names) came with driver 12.8; the
  // older entry point has the same signature and meaning for our use.
  if (!(drv->cuEventElapsedTime =
            reinterpret_cast<decltype(drv->cuEventElapsedTime)>(dlsym(handle, KS_STR(cuEventElapsedTime)))))
    KS_RESOLVE2(cuEventElapsedTime, "cuEventElapsedTime")
  KS_RESOLVE(cuMemsetD8Async)
  KS_RESOLVE(cuMemsetD32Async)
#undef KS_RESOLVE
#undef KS_RESOLVE2
  if (!missing.empty())
    return ks::error{"the CUDA driver (libcuda.so.1) is too old: it lacks " + missing +
                     "; KernelSkill needs a driver for CUDA 12 or newer"};
  CUresult rc = drv->cuInit(0);
  if (rc == CUDA_ERROR_STUB_LIBRARY)
    return ks::error{
        "libcuda.so.1 is the CUDA toolkit's stub library, not a driver: this "
        "machine has no NVIDIA driver installed. Run kernelskill-gpu on a "
        "machine with a GPU, or remove the stub directory from "
        "LD_LIBRARY_PATH if a real driver is installed."};
  if (rc == CUDA_ERROR_NO_DEVICE)
    return ks::error{
        "the CUDA driver is installed but sees no GPU (cuInit: "
        "CUDA_ERROR_NO_DEVICE); check CUDA_VISIBLE_DEVICES and nvidia-smi"};
  if (rc != CUDA_SUCCESS) return ks::error{drv->describe(rc, "cuInit")};
  drv->cuDriverGetVersion(&drv->version);
  return static_cast<const cuda_driver*>(drv);
}

}  // namespace

result<const cuda_driver*> cuda_driver::load() {
  // One attempt per process: dlopen/cuInit are not worth repeating, and their
  // outcome cannot change while the process lives.
  static cuda_driver instance;
  static std::once_flag once;
  static result<const cuda_driver*> outcome = ks::error{"not loaded"};
  std::call_once(once, [] { outcome = open_driver(&instance, instance.handle_); });
  return outcome;
}

std::string cuda_driver::describe(CUresult rc, const char* call) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(rc, &name);
  if (cuGetErrorString) cuGetErrorString(rc, &text);
  std::string out = std::string(call) + ": " + (name ? name : "CUDA error " + std::to_string(rc));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

status cuda_driver::check(CUresult rc, const char* call) const {
  if (rc == CUDA_SUCCESS) return status::success();
  return ks::error{describe(rc, call)};
}

result<std::vector<device_info>> query_devices(const cuda_driver& drv) {
  int count = 0;
  if (auto s = drv.check(drv.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s) return ks::error{s.message()};
  std::vector<device_info> out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    if (auto s = drv.check(drv.cuDeviceGet(&dev, i), "cuDeviceGet"); !s) return ks::error{s.message()};
    device_info info;
    info.ordinal = i;
    char name[256] = {0};
    drv.cuDeviceGetName(name, sizeof(name) - 1, dev);
    info.name = name;
    drv.cuDeviceGetAttribute(&info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    drv.cuDeviceGetAttribute(&info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    drv.cuDeviceGetAttribute(&info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    int clock_khz = 0;
    drv.cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev);
    info.clock_mhz = clock_khz / 1000;
    size_t bytes = 0;
    drv.cuDeviceTotalMem(&bytes, dev);
    info.total_memory_bytes = bytes;
    out.push_back(std::move(info));
  }
  return out;
}

// Errors after which the context can no longer be used (CUDA's "sticky" errors).
bool poisons_context(CUresult rc) {
  switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

}  // namespace ks
