#include "gpu/kernel_args.hpp"

#include <cstring>

namespace ks {

void** kernel_args::pointers() {
  pointers_.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) pointers_[i] = &slots_[i];
  return pointers_.data();
}

void kernel_args::add(const void* value, size_t bytes) {
  uint64_t slot = 0;
  std::memcpy(&slot, value, bytes);
  slots_.push_back(slot);
  sizes_.push_back(static_cast<uint8_t>(bytes));
}

result<kernel_args> pack_kernel_args(const resolved_step& step, const address_lookup& address_of) {
  kernel_args out;
  for (size_t i = 0; i < step.args.size(); ++i) {
    const resolved_arg& a = step.args[i];
    const std::string field = step.label() + ": args[" + std::to_string(i) + "]";
    if (a.kind == "tensor") {
      auto address = address_of(a.tensor);
      if (!address) return error{field + ": " + address.message()};
      uint64_t v = *address;
      out.add(&v, sizeof(v));
    } else if (a.kind == "int" && a.type == "int32") {
      int32_t v = static_cast<int32_t>(a.int_value);
      out.add(&v, sizeof(v));
    } else if (a.kind == "int" && a.type == "int64") {
      int64_t v = a.int_value;
      out.add(&v, sizeof(v));
    } else if (a.kind == "float" && a.type == "float32") {
      float v = static_cast<float>(a.float_value);
      out.add(&v, sizeof(v));
    } else if (a.kind == "float" && a.type == "float64") {
      double v = a.float_value;
      out.add(&v, sizeof(v));
    } else {
      return error{field + ": cannot pass a " + a.kind + " argument of type '" + a.type +
                   "' (expected a tensor, int32, int64, float32 or float64)"};
    }
  }
  return out;
}

}  // namespace ks
