#include "gpu/trial_cache.hpp"

#include <cstdio>

namespace ks {

uint64_t estimate_compare_bytes(uint64_t numel, uint64_t element_bytes) {
  const uint64_t widened = element_bytes >= 8 || element_bytes == 0 ? 8 : 4;
  return numel * (4 * widened + 3);
}

uint64_t default_trial_cache_bytes(uint64_t device_bytes) { return device_bytes / 2; }

uint64_t trial_cache_cap(uint64_t budget, uint64_t device_bytes, const trial_footprint& f) {
  const uint64_t taken = kDeviceReserveBytes + f.working() + f.cached();
  if (taken >= device_bytes) return 0;
  return std::min(budget, device_bytes - taken);
}

std::string describe_bytes(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GB (%llu bytes)", static_cast<double>(bytes) / 1e9,
                static_cast<unsigned long long>(bytes));
  return buf;
}

status check_fits_device(const trial_footprint& f, uint64_t device_bytes, const std::string& device_name) {
  const uint64_t need = f.cached() + f.working() + kDeviceReserveBytes;
  if (need <= device_bytes) return {};
  return error{"the task does not fit " + device_name + ": one trial needs " + describe_bytes(need) +
               " of device memory (inputs " + describe_bytes(f.inputs) +
               " three times: as drawn, the "
               "candidate's copy and the reference's; outputs " +
               describe_bytes(f.outputs) + " three times: the reference's and the candidate's two runs; parameters " +
               describe_bytes(f.parameters) + " three times; scratch " + describe_bytes(f.scratch) +
               "; the output comparison " + describe_bytes(f.compare) + "; " + describe_bytes(kDeviceReserveBytes) +
               " kept for the CUDA context and libraries), but the device has " + describe_bytes(device_bytes) +
               ". Review it at a smaller size (review.size, --size)"};
}

}  // namespace ks
