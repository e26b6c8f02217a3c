#pragma once
// A submitted reference is untrusted code: before anything runs it (the graph export's
// constant propagation included), its graph is checked against the operators a
// reference may use — an allow-list, gpu/reference_ops_allowed.txt (written by
// gpu/reference_ops_allowed.py from the PyTorch versions that run references): the
// aten:: and prim:: operators that compute on tensors and values, and the node kinds of
// TorchScript's control flow and calls. Anything else is refused, naming the operator
// and where it is in the source; among them, by name and with the reason: what reads or
// writes files (aten::from_file, aten::save, aten::load), prints (prim::Print,
// aten::warn: printing corrupts the graph's JSON on stdout), calls Python or other
// processes, or re-points a tensor at raw storage (aten::set_); and every operator of
// another namespace (custom or Python operators, whose code is not LibTorch's).
//
// The check reaches everything the graph can run: nested blocks, graph attributes
// (prim::fork's subgraph, which torch::jit::Inline does not enter), and the graphs of
// the functions and methods called from there. A call whose code cannot be read (a
// method through an interface, a built-in function) is refused.
//
// This is the first line of defence; the second is the OS sandbox the reference's
// process runs in (base/sandbox.hpp).
//
// LibTorch-facing (torch::jit::Graph): include only from gpu/'s LibTorch sources.

#include <string>

#include <torch/csrc/jit/ir/ir.h>

#include "base/result.hpp"

namespace ks {

// ok, or an error "uses OP, which …: <source line>"; `graph` should be inlined first so
// that the ops of called functions are seen with their source lines.
status check_reference_ops(const torch::jit::Graph& graph);

// Whether `name` ("aten::add") is an operator a reference may use.
bool reference_op_allowed(const std::string& name);

}  // namespace ks
