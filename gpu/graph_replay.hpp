#pragma once
// A whole plan replayed as one CUDA graph (issue 46, point 1): for a launch-bound plan
// (plan/launch_bound.hpp decides which), one graph launch replaces its hundreds of
// kernel launches and ATen calls. The reviewer times such a plan this way, as an
// exported ModelNew runs it (export/kernelbench_model_new.py).
//
// What it promises:
// - capture() runs the plan once on a side stream first (outside the graph: cuBLAS
//   and cuDNN initialise lazily there), then captures it with LibTorch's
//   at::cuda::CUDAGraph, whose private memory pool keeps every tensor the plan
//   allocated while captured (outputs, scratch, the ops' own temporaries) for the
//   graph's life: nothing else is handed that memory while the graph can replay;
// - a capture that fails (an op that synchronises with the host, reads a value back,
//   or runs on another stream) ends the capture and returns why; the caller then runs
//   plain launches;
// - call() is one call as a module makes it: the call's inputs copied into the tensors
//   the graph reads, the graph replayed on the current stream, its outputs cloned — so
//   no call's outputs alias a later call's.
// Needs a LibTorch built with CUDA; elsewhere capture() says so (available() is
// false) and nothing else can be reached.
//
// This header includes ATen's Tensor; keep it out of torch-free code.

#include <cuda.h>

#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "base/result.hpp"

namespace ks {

class plan_graph {
 public:
  // Enqueues the whole plan on `stream` (also ATen's current stream while it runs) and
  // returns its outputs.
  using enqueue_fn = std::function<std::vector<at::Tensor>(CUstream stream)>;

  // Whether this build can capture graphs (its LibTorch has CUDA).
  static bool available();

  static result<std::unique_ptr<plan_graph>> capture(const enqueue_fn& enqueue);
  ~plan_graph();
  plan_graph(const plan_graph&) = delete;
  plan_graph& operator=(const plan_graph&) = delete;

  // `inputs[k]` copied into `buffers[k]` (the tensors the plan read when captured),
  // the graph replayed on the current stream, its outputs cloned. Asynchronous.
  result<std::vector<at::Tensor>> call(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& buffers);

  // The graph's own output tensors, rewritten by every replay.
  const std::vector<at::Tensor>& outputs() const;

 private:
  struct impl;
  explicit plan_graph(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ks
