#pragma once
// A submitted reference is untrusted code: before anything runs it (the graph export's
// constant propagation included), its graph is checked against the operators a
// reference may use. Allowed: the aten:: and prim:: operators that compute on tensors
// and values. Refused, naming the operator and where it is in the source: anything that
// reads or writes files (aten::from_file, aten::save, aten::load), prints (prim::Print,
// aten::warn: printing corrupts the graph's JSON on stdout), or lives in another
// namespace (custom or Python operators, whose code is not LibTorch's).
//
// LibTorch-facing (torch::jit::Graph): include only from gpu/'s LibTorch sources.

#include <string>

#include <torch/csrc/jit/ir/ir.h>

#include "base/result.hpp"

namespace ks {

// ok, or an error "uses OP, which …: <source line>"; `graph` should be inlined first so
// that the ops of called functions are seen.
status check_reference_ops(const torch::jit::Graph& graph);

}  // namespace ks
