#pragma once
// The dtypes a plan and a task may name, and what their tensors take in bytes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/task.hpp"

namespace ks {

// The dtypes a plan may name (torch's names): float32, float16, bfloat16, float64,
// int32, int64, bool.
const std::vector<std::string>& plan_dtypes();
bool is_plan_dtype(std::string_view dtype);
// Bytes per element of a plan dtype; 0 for an unknown name.
int64_t dtype_size(std::string_view dtype);
// The bytes the tensors of `specs` take, as their shapes and dtypes say (a negative
// dimension or an unknown dtype counts 0).
uint64_t bytes_of(const std::vector<tensor_spec>& specs);

}  // namespace ks
