#pragma once
// Kernel arguments as cuLaunchKernel takes them: an array with one pointer per kernel
// parameter, each pointing at the argument's value, which is as wide as the
// parameter: 8 bytes for a tensor (its device address), 4 for int32 and float32, 8 for
// int64 and float64. The widths come from the resolved plan, whose validator has
// already matched every argument's type to its parameter (docs/launch-plan.md,
// "Kernel signatures and argument binding"). Needs no GPU.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "plan/plan_validator.hpp"

namespace ks {

class kernel_args {
 public:
  // The array for cuLaunchKernel's kernelParams. Valid until this object is changed
  // or destroyed (the values live inside it).
  void** pointers();
  size_t size() const { return sizes_.size(); }
  // Bytes of argument i (4 or 8) and its value.
  size_t bytes(size_t i) const { return sizes_[i]; }
  const void* value(size_t i) const { return &slots_[i]; }

  void add(const void* value, size_t bytes);

 private:
  std::vector<uint64_t> slots_;  // one 8-byte, 8-aligned slot per argument
  std::vector<uint8_t> sizes_;
  std::vector<void*> pointers_;
};

// The device address of a tensor of the plan, by name.
using address_lookup = std::function<result<uint64_t>(const std::string& tensor)>;

// Packs the arguments of a kernel step: tensors through `address_of`, numbers as
// their plan type (int32, int64, float32, float64). Errors name the step and the
// argument (an unknown tensor, an unknown type).
result<kernel_args> pack_kernel_args(const resolved_step& step, const address_lookup& address_of);

}  // namespace ks
