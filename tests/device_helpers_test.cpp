// The device helpers the rules coder's sources carry (coder/rules/cuda/*.cuh, embedded
// by coder/rules/text/device_helpers.hpp): each compiles on its own with real NVRTC (no GPU
// needed), with a kernel that calls every function it defines so that the code is
// generated and ptxas checks it, for sm_90a and for sm_80 (the helpers' other paths).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "coder/rules/text/device_helpers.hpp"
#include "gpu/nvrtc_compiler.hpp"

using namespace ks;
namespace cuda = ks::rules::cuda;

namespace {

void compiles(const std::string& what, const std::string& source, const std::string& arch) {
  nvrtc_options o;
  o.isolate = false;
  o.arch = arch;
  nvrtc_compiler c(o);
  auto r = c.compile(source);
  REQUIRE(r);
  INFO(what << " for " << arch << ":\n" << source << "\n" << r->log);
  CHECK(r->ok);
}

std::string file(const std::string& name) {
  std::ifstream in(std::string(KS_SOURCE_DIR) + "/coder/rules/cuda/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("device helpers: each embedded file is its .cuh byte for byte", "[device_helpers]") {
  CHECK(cuda::common_cuh() == file("common.cuh"));
  CHECK(cuda::fast_math_cuh() == file("fast_math.cuh"));
  CHECK(cuda::precise_math_cuh() == file("precise_math.cuh"));
  CHECK(cuda::welford_cuh() == file("welford.cuh"));
  CHECK(cuda::shared_rows_cuh() == file("shared_rows.cuh"));
  CHECK(cuda::cluster_cuh() == file("cluster.cuh"));
  CHECK(cuda::split_tf32_cuh() == file("split_tf32.cuh"));
  CHECK(!cuda::common_cuh().empty());
}

TEST_CASE("device helpers: each compiles on its own with NVRTC", "[device_helpers][nvrtc]") {
  const std::string math_use = R"(
extern "C" __global__ void use_math(float* y) { y[0] = KS_DIV(KS_EXP(y[1]), y[2]); }
)";
  for (const std::string arch : {"sm_90a", "sm_80"}) {
    compiles("fast_math.cuh", std::string(cuda::fast_math_cuh()) + math_use, arch);
    compiles("precise_math.cuh", std::string(cuda::precise_math_cuh()) + math_use, arch);
    // common.cuh reads KS_EXP: it always follows one of the two.
    for (std::string_view math : {cuda::fast_math_cuh(), cuda::precise_math_cuh()})
      compiles("common.cuh", std::string(math) + std::string(cuda::common_cuh()) + R"(
extern "C" __global__ void use_common(float* y) {
  float m = y[0], s = y[1];
  ks_ms_merge(m, s, y[2], y[3]);
  y[0] = m + s + KS_INF;
}
)",
               arch);
    compiles("welford.cuh", std::string(cuda::welford_cuh()) + R"(
extern "C" __global__ void use_welford(float* y) {
  float n = y[0], m = y[1], m2 = y[2];
  ks_wf_merge(n, m, m2, y[3], y[4], y[5]);
  y[0] = n + m + m2;
}
)",
             arch);
    compiles("shared_rows.cuh", std::string(cuda::shared_rows_cuh()) + R"(
extern "C" __global__ void use_shared(const float* x, float* y) {
  KS_DYNAMIC_SHARED(buf);
  float* row = reinterpret_cast<float*>(buf);
  ks_cp_async16(row + 4 * threadIdx.x, x + 4 * threadIdx.x);
  ks_cp_async4(row + 1024 + threadIdx.x, x + threadIdx.x);
  ks_cp_async_wait();
  __syncthreads();
  y[threadIdx.x] = row[threadIdx.x] + row[1024 + threadIdx.x];
}
)",
             arch);
    compiles("split_tf32.cuh (twice: guarded)",
             std::string(cuda::split_tf32_cuh()) + std::string(cuda::split_tf32_cuh()) + R"(
extern "C" __global__ void use_split(float* y) { y[0] = ks_tf32(y[1]); }
)",
             arch);
  }
  // Clusters exist from sm_90 on; below it the helpers are declared only and no
  // kernel calls them.
  compiles("cluster.cuh", std::string(cuda::cluster_cuh()) + R"(
extern "C" __global__ void __cluster_dims__(2, 1, 1) use_cluster(float* y) {
  __shared__ float part[32];
  part[threadIdx.x % 32] = y[threadIdx.x];
  ks_cluster_sync();
  const float* other = ks_cluster_map(part, 1);
  ks_cluster_arrive();
  ks_cluster_wait();
  y[threadIdx.x] = other[threadIdx.x % 32];
}
)",
           "sm_90a");
  compiles("cluster.cuh (declarations)", std::string(cuda::cluster_cuh()), "sm_80");
}
