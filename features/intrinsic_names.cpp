#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

const std::set<std::string>& transcendental_names() {
  static const std::set<std::string> s = {
      "exp",    "expf",     "exp2",    "exp2f",      "exp10",        "exp10f",       "expm1",      "expm1f",
      "__expf", "__exp10f", "log",     "logf",       "log2",         "log2f",        "log10",      "log10f",
      "log1p",  "log1pf",   "__logf",  "__log2f",    "__log10f",     "tanh",         "tanhf",      "__tanhf",
      "erf",    "erff",     "erfc",    "erfcf",      "erfinv",       "erfinvf",      "normcdf",    "normcdff",
      "sin",    "sinf",     "cos",     "cosf",       "tan",          "tanf",         "__sinf",     "__cosf",
      "__tanf", "sincos",   "sincosf", "__sincosf",  "sinpi",        "sinpif",       "cospi",      "cospif",
      "pow",    "powf",     "__powf",  "sqrt",       "sqrtf",        "rsqrt",        "rsqrtf",     "cbrt",
      "cbrtf",  "rcbrt",    "rcbrtf",  "__fsqrt_rn", "__fsqrt_rz",   "__fsqrt_ru",   "__fsqrt_rd", "__frsqrt_rn",
      "atan",   "atanf",    "atan2",   "atan2f",     "asin",         "asinf",        "acos",       "acosf",
      "sinh",   "sinhf",    "cosh",    "coshf",      "asinh",        "asinhf",       "acosh",      "acoshf",
      "atanh",  "atanhf",   "hexp",    "h2exp",      "hexp2",        "h2exp2",       "hlog",       "h2log",
      "hlog2",  "h2log2",   "hsin",    "h2sin",      "hcos",         "h2cos",        "hsqrt",      "h2sqrt",
      "hrsqrt", "h2rsqrt",  "htanh",   "h2tanh",     "htanh_approx", "h2tanh_approx"};
  return s;
}

const std::set<std::string>& fast_math_names() {
  static const std::set<std::string> s = {"__expf",        "__exp10f",        "__logf", "__log2f", "__log10f",
                                          "__powf",        "__sinf",          "__cosf", "__tanf",  "__sincosf",
                                          "__fdividef",    "__tanhf",         "rsqrtf", "rsqrt",   "htanh_approx",
                                          "h2tanh_approx", "__frcp_rn_approx"};
  return s;
}

bool is_shuffle(const std::string& n) { return n.rfind("__shfl", 0) == 0; }
bool is_reducing_shuffle(const std::string& n) {
  return n.rfind("__shfl_xor", 0) == 0 || n.rfind("__shfl_down", 0) == 0 || n.rfind("__shfl_up", 0) == 0;
}
bool is_atomic(const std::string& n) {
  std::string b = n;
  size_t c = b.rfind("::");
  if (c != std::string::npos) b = b.substr(c + 2);
  return b.rfind("atomic", 0) == 0 && b.size() > 6 && b[6] >= 'A' && b[6] <= 'Z';
}
bool is_accumulating_atomic(const std::string& n) { return is_atomic(n) && n.find("Exch") == std::string::npos; }
std::string last_name(const std::string& n) {
  size_t c = n.rfind("::");
  return c == std::string::npos ? n : n.substr(c + 2);
}
bool is_ldg(const std::string& n) {
  return n == "__ldg" || n == "__ldcg" || n == "__ldca" || n == "__ldcs" || n == "__ldlu" || n == "__ldcv";
}
bool is_st_hint(const std::string& n) { return n == "__stcg" || n == "__stcs" || n == "__stwb" || n == "__stwt"; }
bool is_reduce_sync_intrinsic(const std::string& n) {
  return n.rfind("__reduce_", 0) == 0 && n.find("_sync") != std::string::npos;
}
bool is_syncthreads(const std::string& n) {
  return n == "__syncthreads" || n == "__syncthreads_count" || n == "__syncthreads_and" || n == "__syncthreads_or";
}
bool names_tensor_cores(const std::string& n) {
  return n == "wmma" || n == "mma_sync" || n == "__hmma_m16n16k16_mma_f32f32" || n == "wgmma";
}
bool is_half2_intrinsic(const std::string& n) {
  return n == "__hadd2" || n == "__hmul2" || n == "__hfma2" || n == "__hsub2" || n == "__floats2half2_rn" ||
         n == "__float2half2_rn" || n == "__half22float2" || n == "__float22half2_rn" || n == "__hmax2" ||
         n == "__hmin2";
}
bool asm_uses_tensor_cores(const std::string& text) {
  return text.find("mma.sync") != std::string::npos || text.find("wgmma") != std::string::npos ||
         text.find("wmma.") != std::string::npos;
}
bool asm_uses_approx_math(const std::string& text) { return text.find(".approx") != std::string::npos; }

}  // namespace ks::features::analysis
