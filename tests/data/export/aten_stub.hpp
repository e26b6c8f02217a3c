// Stand-ins for the parts of ATen, c10 and the CUDA runtime that the launcher written by
// `kernelskill export` uses, with PyTorch 2.x's signatures, so that export_test can
// compile a launcher with the host compiler where neither nvcc's PyTorch nor a GPU is
// available. Declarations only: the launcher is compiled (-fsyntax-only), never run.
// KS_LAUNCH becomes a plain call of the kernel's host declaration, so every argument
// is checked against the kernel's parameter types.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;
enum cudaError_t { cudaSuccess = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value);
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
struct __half { unsigned short r; };
using half = __half;
struct __half2 { __half a, b; };
using half2 = __half2;
struct __nv_bfloat16 { unsigned short r; };
struct __nv_bfloat162 { __nv_bfloat16 a, b; };

#define KS_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ((void)(dim3)(grid), (void)(dim3)(block), (void)(int64_t)(smem), (void)(cudaStream_t)(stream), kernel(__VA_ARGS__))
#define TORCH_CHECK(cond, ...) ((void)(bool)(cond))  // the message parts are not checked
#define C10_CUDA_CHECK(expr) ((void)(cudaError_t)(expr))
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ((void)0)

namespace c10 {
using string_view = std::string_view;
template <class T>
class ArrayRef {
 public:
  ArrayRef();
  ArrayRef(const std::vector<T>& v);
  ArrayRef(std::initializer_list<T> l);
  ArrayRef(const T* data, size_t n);
  size_t size() const;
};
template <class T>
bool operator==(ArrayRef<T>, ArrayRef<T>);
template <class T>
bool operator!=(ArrayRef<T>, ArrayRef<T>);
using IntArrayRef = ArrayRef<int64_t>;
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr DeviceType kCUDA = DeviceType::CUDA;
using DeviceIndex = int8_t;
struct Device {
  Device(DeviceType t, DeviceIndex i = -1);
  bool operator==(const Device&) const;
};
namespace cuda {
struct CUDAGuard {
  explicit CUDAGuard(Device d);
};
}  // namespace cuda
}  // namespace c10

namespace at {
using c10::Device;
using c10::IntArrayRef;
using c10::kCUDA;
enum class ScalarType : int8_t { Float, Half, BFloat16, Double, Int, Long, Bool };
enum class MemoryFormat : int8_t { Contiguous, Preserve, ChannelsLast, ChannelsLast3d };
constexpr ScalarType kFloat = ScalarType::Float, kHalf = ScalarType::Half, kBFloat16 = ScalarType::BFloat16,
                     kDouble = ScalarType::Double, kInt = ScalarType::Int, kLong = ScalarType::Long,
                     kBool = ScalarType::Bool;
struct TensorOptions {
  TensorOptions();
  TensorOptions device(Device d) const;
  TensorOptions dtype(ScalarType t) const;
};
class Scalar {
 public:
  Scalar(int64_t v);
  Scalar(double v);
};
class Tensor {
 public:
  IntArrayRef sizes() const;
  int64_t dim() const;
  int64_t size(int64_t d) const;
  int64_t numel() const;
  ScalarType scalar_type() const;
  bool is_cuda() const;
  Device device() const;
  Tensor contiguous(MemoryFormat memory_format = MemoryFormat::Contiguous) const;
  Tensor permute(IntArrayRef dims) const;
  void* data_ptr() const;
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
};
Tensor empty(IntArrayRef size, TensorOptions options);
Tensor zeros(IntArrayRef size, TensorOptions options);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = Scalar(1.0),
             const Scalar& alpha = Scalar(1.0));
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups);
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
              c10::string_view padding, IntArrayRef dilation, int64_t groups);
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = Scalar(int64_t{1}));
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = Scalar(int64_t{1}));
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = Scalar(int64_t{1}));
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = Scalar(int64_t{1}));
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b, std::optional<c10::string_view> rounding_mode);
Tensor div(const Tensor& a, const Scalar& b, std::optional<c10::string_view> rounding_mode);
Tensor softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor gelu(const Tensor& a, c10::string_view approximate = "none");
Tensor relu(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor silu(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
namespace cuda {
struct CUDAStream {
  operator cudaStream_t() const;
};
CUDAStream getCurrentCUDAStream(c10::DeviceIndex device = -1);
}  // namespace cuda
}  // namespace at

// Dispatcher steps: the launcher's calls, without the helpers' bodies (which need the
// real c10::Dispatcher; they are compiled on the GPU machine).
#include <map>
struct ks_arg {};
ks_arg ks_targ(const at::Tensor& t);
ks_arg ks_iarg(int64_t v);
ks_arg ks_farg(double v);
std::vector<at::Tensor> ks_call_by_schema(const std::map<std::string, std::string>& attrs,
                                          const std::vector<ks_arg>& args, const c10::Device& device);
struct ks_prepared_step {};
ks_prepared_step ks_prepare_by_schema(const std::map<std::string, std::string>& attrs,
                                      const std::vector<ks_arg>& args);
std::vector<at::Tensor> ks_call_prepared(const ks_prepared_step& step, const std::vector<ks_arg>& args,
                                         const c10::Device& device);

// Library steps' results (gpu/result_adoption.hpp in the module): the launcher's call,
// without the body (which needs the real at::Tensor's storage; reviewer_test compiles
// and runs it against CPU LibTorch).
namespace ks {
namespace result_adoption {
bool adoptable(const std::vector<at::Tensor>& results, size_t k, const at::Tensor& dst,
               const std::vector<const at::Tensor*>& live);
}  // namespace result_adoption
}  // namespace ks
