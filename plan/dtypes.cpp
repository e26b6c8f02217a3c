#include "plan/dtypes.hpp"

#include <algorithm>

namespace ks {

const std::vector<std::string>& plan_dtypes() {
  static const std::vector<std::string> d = {"float32", "float16", "bfloat16", "float64", "int32", "int64", "bool"};
  return d;
}

bool is_plan_dtype(std::string_view dtype) {
  for (auto& d : plan_dtypes())
    if (d == dtype) return true;
  return false;
}

int64_t dtype_size(std::string_view d) {
  if (d == "float32" || d == "int32") return 4;
  if (d == "float16" || d == "bfloat16") return 2;
  if (d == "float64" || d == "int64") return 8;
  if (d == "bool") return 1;
  return 0;
}

uint64_t bytes_of(const std::vector<tensor_spec>& specs) {
  uint64_t b = 0;
  for (const auto& s : specs) {
    uint64_t n = 1;
    for (int64_t d : s.shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
    b += n * static_cast<uint64_t>(std::max<int64_t>(dtype_size(s.dtype), 0));
  }
  return b;
}

}  // namespace ks
