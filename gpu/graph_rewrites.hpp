#pragma once
// What graph_export does to a reference's TorchScript graph between inlining it and
// writing it (gpu/graph_export.hpp says why each is needed): the forward's in-place
// work made functional, and a graph with control flow specialised to the task's
// shapes. Internal to ks_torch_reference: includes LibTorch's IR header, so only the
// graph export's translation units include it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

namespace ks::graph_rewrites {

// Shapes known without looking at values, keyed by Value::unique() (never reused,
// unlike addresses): `known` comes from the probe; a tensor downstream of an op whose
// output shape depends on values (nonzero, masked_select, unique, …) is left out.
using shape_map = std::map<size_t, std::vector<int64_t>>;

// Dtypes of the probed tensors and the graph's inputs, by Value::unique(): never
// value-dependent.
using dtype_map = std::map<size_t, c10::ScalarType>;

// Every node of a graph, nested blocks included, in order.
void each_node(torch::jit::Block* block, const std::function<void(torch::jit::Node*)>& f);

// Drops in place ops on a parameter whose result nothing reads (a module's state
// updates); parameters are the graph inputs from `first_parameter` on.
void drop_state_updates(torch::jit::Graph& graph, size_t first_parameter);

// A list grown by appends as the list it holds at each read. Returns whether anything
// changed.
bool functional_appends(torch::jit::Graph& graph);

// copy_ into module state as the value it gives to what reads it afterwards. Returns
// the nodes made (specialise_to_shapes drops those that change nothing).
std::set<torch::jit::Node*> functional_copies(torch::jit::Graph& graph);

// Whether a list argument holds a number computed in the forward.
bool has_computed_lists(torch::jit::Graph& graph);

// Whether the graph has control flow (an if or a loop, at any depth) or unpacks a list.
bool has_control_flow(torch::jit::Graph& graph);

// Specialises the graph to the task's `shapes` and `dtypes` (its layout, device and
// shape queries folded to constants, loops unrolled, pieces unpacked as slices, a
// size's arithmetic on 0-dim integer tensors made out of place so that it folds), in
// rounds while a round changes it, at most four. `copies` are functional_copies'.
void specialise_to_shapes(std::shared_ptr<torch::jit::Graph> g, const shape_map& shapes, const dtype_map& dtypes,
                          const std::set<torch::jit::Node*>& copies = {});

// A 0-dim tensor made in forward from a number (torch.tensor(c, device=x.device)) as a
// constant; a traced module's 0-dim tensor constants as the scalars of the scalar
// overloads (and min/max with such a constant as clamp). Returns whether anything
// changed.
bool scalars_for_tensor_constants(torch::jit::Graph& graph, const shape_map& shapes, const dtype_map& dtypes);

}  // namespace ks::graph_rewrites
