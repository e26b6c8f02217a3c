// gpu/graph_replay.hpp on the GPU: a chain of many tiny ops replayed as one CUDA graph
// gives what plain launches give, no call's outputs alias a later call's, and a capture
// that cannot work (a host read-back) is refused without harm. Part of reviewer_test
// (it needs LibTorch); the review's own use of it is tested there ("[graph]").
#include "tests/support/catch_torch.hpp"
#include "tests/support/gpu_skip.hpp"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include "gpu/cuda_driver.hpp"
#include "gpu/graph_replay.hpp"

using namespace ks;

namespace {

// Why there is no GPU to test on, or empty.
std::string no_gpu() {
  auto drv = cuda_driver::load();
  if (!drv) return drv.message();
  auto devices = query_devices(**drv);
  if (!devices) return devices.message();
  return devices->empty() ? "the driver sees no GPU" : "";
}

// 60 small launches: what a launch-bound plan is made of.
std::vector<at::Tensor> chain(const at::Tensor& x) {
  at::Tensor t = x;
  for (int k = 0; k < 30; ++k) t = at::sin(t) * 0.9 + 0.01;
  return {t, t.sum(0)};
}

}  // namespace

TEST_CASE("gpu: a chain of tiny ops replayed as one CUDA graph", "[graph][gpu]") {
  if (std::string why = no_gpu(); !why.empty())
    KS_SKIP("no GPU here (" << why << "); these tests run on the GPU machine");
  // Where there is a GPU, the build's LibTorch must have CUDA: the reviewer relies on it.
  REQUIRE(plan_graph::available());
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const at::Tensor buffer = at::randn({37, 41}, cuda);  // the graph's input
  auto g = plan_graph::capture([&](CUstream) { return chain(buffer); });
  if (!g) FAIL(g.message());
  REQUIRE((*g)->outputs().size() == 2);
  const at::Tensor x1 = at::randn({37, 41}, cuda), x2 = at::randn({37, 41}, cuda);
  auto a = (*g)->call({x1}, {buffer});
  auto b = (*g)->call({x2}, {buffer});
  if (!a) FAIL(a.message());
  if (!b) FAIL(b.message());
  const std::vector<at::Tensor> want1 = chain(x1), want2 = chain(x2);
  for (size_t k = 0; k < 2; ++k) {
    // The same kernels in the same order: what plain launches give, call after call.
    CHECK(at::allclose((*a)[k], want1[k], 1e-6, 1e-6));
    CHECK(at::allclose((*b)[k], want2[k], 1e-6, 1e-6));
    // The first call's outputs are its own: the second replay did not overwrite them.
    CHECK((*a)[k].data_ptr() != (*b)[k].data_ptr());
    CHECK((*a)[k].data_ptr() != (*g)->outputs()[k].data_ptr());
  }
  CHECK_FALSE(at::allclose((*a)[0], (*b)[0]));
  // The input buffer holds the last call's input (it was copied in).
  CHECK(buffer.equal(x2));
}

TEST_CASE("gpu: a capture that reads a value back is refused, and CUDA stays usable", "[graph][gpu]") {
  if (std::string why = no_gpu(); !why.empty())
    KS_SKIP("no GPU here (" << why << "); these tests run on the GPU machine");
  REQUIRE(plan_graph::available());
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const at::Tensor x = at::randn({64}, cuda);
  auto g = plan_graph::capture([&](CUstream) {
    const double m = x.max().item<double>();  // a host read-back: not capturable
    return std::vector<at::Tensor>{x * m};
  });
  REQUIRE_FALSE(g);
  INFO(g.message());
  CHECK_FALSE(g.message().empty());
  // Plain work goes on as before.
  const at::Tensor y = at::ones({128}, cuda) * 2;
  CHECK(y.sum().item<double>() == 256);
  CHECK(at::sin(x).allclose(at::sin(x.cpu()).to(at::kCUDA), 1e-6, 1e-6));
}
