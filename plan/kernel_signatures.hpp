#pragma once
// Kernel signatures: which __global__ functions a candidate's CUDA source defines and
// what parameters they take, read from the source text without compiling it.
//
// The plan validator binds launch arguments against these signatures before NVRTC
// runs, so that a plan naming a missing kernel or passing a tensor where the kernel
// expects an int fails with a message instead of a crash in cuLaunchKernel. The reader
// is a tokenizer, not a compiler: it skips comments, string and character literals
// and preprocessor lines, and understands `extern "C"` (on a declaration or as a
// block), `template <...>`, __launch_bounds__, multi-line parameter lists, default
// arguments, `const` and `__restrict__`. Kernels produced by macros are not seen.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ks {

// The element kind of a parameter: of the value for a scalar, of the pointee for a
// pointer. Vector types (float4, int2, half2, ...) count as their element kind.
enum class scalar_kind : uint8_t {
  int32,     // int, unsigned, int32_t, uint32_t
  int64,     // long, long long, int64_t, uint64_t, size_t, ptrdiff_t
  float32,   // float, float2, float4
  float64,   // double, double2
  float16,   // half, __half, half2
  bfloat16,  // __nv_bfloat16, __nv_bfloat162
  boolean,   // bool
  other,     // void, char, short, structs, template parameters, ...
};
const char* to_string(scalar_kind k);

// One parameter of a kernel.
struct kernel_param {
  std::string type;            // declared type, spaces normalised: "const float* __restrict__"
  std::string name;            // empty when the parameter is unnamed
  bool is_pointer = false;     // a pointer or an array parameter
  bool pointee_const = false;  // pointer to const: the kernel promises not to write through it
  bool is_unsigned = false;    // unsigned integer type
  scalar_kind kind = scalar_kind::other;
  int vector_width = 1;  // 4 for float4, 2 for half2, ...
  friend bool operator==(const kernel_param&, const kernel_param&) = default;
};

// One __global__ function found in the source.
struct kernel_signature {
  std::string name;
  std::vector<kernel_param> params;
  // Launchable by name: extern "C" (so its name is not mangled) and not a template.
  bool launchable = false;
  std::string not_launchable_reason;  // set when !launchable
  int64_t launch_bounds = 0;          // first argument of __launch_bounds__ when a literal, else 0
  int line = 0;                       // 1-based line of the function's name
  // "const float* x, float* y, int64_t n": the parameter list as it reads.
  std::string params_text() const;
  friend bool operator==(const kernel_signature&, const kernel_signature&) = default;
};

// Every __global__ function in `source`, in source order. A kernel declared and later
// defined is listed once. Never fails: text that cannot be understood is skipped,
// since NVRTC reports real syntax errors better than this reader could.
std::vector<kernel_signature> extract_kernel_signatures(std::string_view source);

// The signature named `name`, or nullptr.
const kernel_signature* find_kernel(const std::vector<kernel_signature>& kernels, std::string_view name);

}  // namespace ks
