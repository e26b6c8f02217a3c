#pragma once
// GPU workers and their devices, as a worker describes itself.

#include <cstdint>
#include <string>
#include <vector>

#include "model/fields.hpp"

namespace ks {

struct device_info {
  int32_t ordinal = 0;
  std::string name;
  int32_t cc_major = 0;
  int32_t cc_minor = 0;
  uint64_t total_memory_bytes = 0;
  int32_t multiprocessors = 0;
  int32_t clock_mhz = 0;
  friend bool operator==(const device_info&, const device_info&) = default;
};
template <class F>
auto visit_fields(device_info& x, F&& f) {
  return f("device_info", KS_FIELD(ordinal), KS_FIELD(name), KS_FIELD(cc_major), KS_FIELD(cc_minor),
           KS_FIELD(total_memory_bytes), KS_FIELD(multiprocessors), KS_FIELD(clock_mhz));
}

// What a worker process says about itself. driver_error is non-empty when the CUDA
// driver could not be loaded or initialised (then devices is empty).
struct worker_info {
  std::string host;
  int32_t pid = 0;
  std::string version;
  int32_t driver_version = 0;
  std::string driver_error;
  std::vector<device_info> devices;
  friend bool operator==(const worker_info&, const worker_info&) = default;
};
template <class F>
auto visit_fields(worker_info& x, F&& f) {
  return f("worker_info", KS_FIELD(host), KS_FIELD(pid), KS_FIELD(version), KS_FIELD(driver_version),
           KS_FIELD(driver_error), KS_FIELD(devices));
}

}  // namespace ks
