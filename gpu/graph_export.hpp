#pragma once
// Graph export: the reference's forward as a TorchScript graph (inlined, constants
// propagated, dead code removed), with the shape and dtype of every tensor value and
// the value of every scalar or list, found by running the graph once at the task's
// shapes: on tensors without data (the meta device) where every op allows it, else on
// the GPU if this process has one, else on the CPU, on the task's inputs. It is what
// the rules coder lowers into kernels (coder/task_graph.hpp reads it). LibTorch-free
// header; needs no GPU.
//
// What a network's forward does in place is made functional first, so that the graph
// says what each value is: a list grown by append is the list it holds at each read,
// a tuple built and taken apart is its elements, and a copy_ into module state (a
// graph input or a constant) is the value it gives to what reads it afterwards. A graph
// with control flow, a number computed in the forward inside a list (a view's sizes,
// randn's), or such a copy is specialised to the task's shapes (its sizes become
// constants; `t is None` of a tensor or a tuple is false, `a is a` true, an
// unchecked_cast of a value already of its type is that value, a move to the task's
// device moves nothing; a device that is only ever an op's `device` argument stays the
// inputs' device, so that the probe makes tensors where its inputs are), and a tensor
// split or chunked and unpacked becomes slices of it. A probe off the CPU takes the
// graph's tensor constants (not 0-dim ones) with it.
// What a folded branch computed is probed and folded again (nn.MultiheadAttention's
// fast-path checks, nn.GRU's Optional state), at most four passes. A module attribute
// that is a list of the module's own tensors (a scripted recurrent layer's
// _flat_weights) is the list of the task parameters that mirror them.

#include <string>

#include "base/result.hpp"
#include "model/task.hpp"

namespace ks {

// The graph of `task`'s reference as JSON (format: coder/task_graph.hpp). Run at the
// task's current shapes (apply with_size first for a small one). TorchScript-source
// references only: a saved module's graph carries `self` and its attributes.
// `probe_note`, when given, gets where the graph was probed (meta, cuda or cpu) and why
// each cheaper way was not taken.
result<std::string> export_graph_json(const task_spec& task, std::string* probe_note = nullptr);

}  // namespace ks
