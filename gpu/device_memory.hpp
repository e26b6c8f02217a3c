#pragma once
// The device memory LibTorch's caching allocator holds in this process beyond its live
// tensors, and giving it back.
//
// A worker reviews task after task in one process: each review's candidate outputs,
// scratch buffers and reference intermediates are freed into the allocator's cache,
// which keeps them. On an H100 running level 3 (kernelskill bench, 2026-12-06) the
// worker held 78 of 80 GB, 40 of them its trial cache, and of the bench's 47
// torch.compile warm-ups beside it 15 finished: 10 ran out of memory and 19 more failed
// with a CUDA error within 6 s of starting.
//
// What it promises:
// - cached_device_bytes(): the bytes the allocator has reserved on the current device
//   but no tensor holds (0 where the build's LibTorch has no CUDA);
// - release_cached_device_memory(): gives those bytes back to the driver, on every
//   device, so that other processes on the GPU can have them; live tensors (the trial
//   cache's inputs and reference outputs) stay where they are. It synchronizes with the
//   device first (the allocator's own emptyCache). A no-op without CUDA.

#include <cstdint>

namespace ks {

uint64_t cached_device_bytes();
void release_cached_device_memory();

}  // namespace ks
