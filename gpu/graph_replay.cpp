// CUDA graph replay of a plan (gpu/graph_replay.hpp). The capture itself needs
// LibTorch's CUDA half (libtorch_cuda, c10_cuda): compiled where the build's LibTorch
// has it (KS_TORCH_CUDA, gpu/CMakeLists.txt), and checked to compile everywhere.
#include "gpu/graph_replay.hpp"

#include <stdexcept>
#include <string>

#include <c10/util/Exception.h>

#if KS_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ks {

#if KS_TORCH_CUDA

struct plan_graph::impl {
  at::cuda::CUDAGraph graph;
  std::vector<at::Tensor> outputs;
};

bool plan_graph::available() { return true; }

result<std::unique_ptr<plan_graph>> plan_graph::capture(const enqueue_fn& enqueue) {
  auto p = std::make_unique<impl>();
  try {
    // The plan's inputs were written on the default stream: the side stream starts
    // after everything before it.
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    c10::cuda::CUDAStreamGuard guard(side);
    enqueue(side.stream());
    side.synchronize();
    p->graph.capture_begin();
    try {
      p->outputs = enqueue(side.stream());
    } catch (...) {
      // End the capture (it fails: the graph is discarded) so that the stream and the
      // allocator are usable again; the plan's error is the one to report.
      try {
        p->graph.capture_end();
      } catch (...) {
      }
      (void)cudaGetLastError();
      throw;
    }
    p->graph.capture_end();
    side.synchronize();
  } catch (const c10::Error& e) {
    (void)cudaGetLastError();
    return error{e.what_without_backtrace()};
  } catch (const std::exception& e) {
    (void)cudaGetLastError();
    return error{e.what()};
  }
  return std::unique_ptr<plan_graph>(new plan_graph(std::move(p)));
}

result<std::vector<at::Tensor>> plan_graph::call(const std::vector<at::Tensor>& inputs,
                                                 const std::vector<at::Tensor>& buffers) {
  try {
    for (size_t k = 0; k < inputs.size() && k < buffers.size(); ++k)
      if (!inputs[k].is_same(buffers[k])) buffers[k].copy_(inputs[k]);
    impl_->graph.replay();
    std::vector<at::Tensor> out;
    out.reserve(impl_->outputs.size());
    for (const at::Tensor& t : impl_->outputs) out.push_back(t.clone());
    return out;
  } catch (const c10::Error& e) {
    return error{e.what_without_backtrace()};
  } catch (const std::exception& e) {
    return error{e.what()};
  }
}

#else

struct plan_graph::impl {
  std::vector<at::Tensor> outputs;
};

bool plan_graph::available() { return false; }

result<std::unique_ptr<plan_graph>> plan_graph::capture(const enqueue_fn&) {
  return error{"this build's LibTorch has no CUDA (libtorch_cuda), so it cannot capture CUDA graphs"};
}

result<std::vector<at::Tensor>> plan_graph::call(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&) {
  return error{"this build's LibTorch has no CUDA (libtorch_cuda), so it cannot replay CUDA graphs"};
}

#endif

plan_graph::plan_graph(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
plan_graph::~plan_graph() = default;
const std::vector<at::Tensor>& plan_graph::outputs() const { return impl_->outputs; }

}  // namespace ks
