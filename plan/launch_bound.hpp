#pragma once
// Whether a plan is launch-bound: so many short steps that the host's cost of issuing
// them (a kernel launch, an ATen call) outweighs the GPU's time for the bytes they move
// — a whole network at a small batch. Such a plan is replayed as one CUDA graph, in the
// reviewer's timing (gpu/graph_replay.hpp) and in an exported ModelNew alike; this is
// the one place that decides it (issue 46, point 1; docs/launch-plan.md, "CUDA graph
// replay").
//
// The rule: at least graph_rule::min_steps steps, and at most
// graph_rule::max_bytes_per_step bytes moved per step. Bytes moved are the plan's
// inputs and parameters (given) plus its outputs, scratch and intermediates of known
// size, each counted once: a lower bound of the traffic, which is what a step's GPU
// time scales with when it is memory-bound. On an H100 a step costs the host 5-10 us
// (DenseNet121: 10.0 ms for 3.9 ms of GPU time over 458 launches and 183 library
// steps), the time HBM3 takes for about 16-32 MB; below 16 MiB a step, its launch is
// at least as long as its work.

#include <cstdint>
#include <string>

#include "plan/plan_validator.hpp"

namespace ks {

// What a plan launches and moves.
struct plan_weight {
  size_t kernel_launches = 0;
  size_t library_steps = 0;
  uint64_t bytes = 0;  // see above
  size_t steps() const { return kernel_launches + library_steps; }
};

// `tensor_bytes`: the plan's inputs and parameters, in bytes.
plan_weight weigh_plan(const resolved_plan& plan, uint64_t tensor_bytes);

struct graph_rule {
  size_t min_steps = 4;
  uint64_t max_bytes_per_step = uint64_t{16} << 20;
};

bool launch_bound(const plan_weight& w, const graph_rule& rule = {});

// "12 kernel launches and 3 library steps moving 1.5 MB (100 kB a step)": the numbers
// the rule read, for the review's message and the export's note.
std::string describe_weight(const plan_weight& w);

}  // namespace ks
