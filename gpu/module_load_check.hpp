#pragma once
// A saved TorchScript module runs code while it is being loaded: torch::jit::load calls
// the `__setstate__` of every object whose class defines one, before anyone could look
// at the module's forward. So a submitted module's load-time code is checked before it
// is loaded, against the same operator rules as a reference's forward
// (gpu/reference_ops.hpp): the archive's classes are compiled from its code (compiling
// runs nothing) and each `__setstate__`, with what it calls inlined, is checked.
//
// What it promises: check_module_load_code is ok for a module without load-time code
// (every module torch.nn's own layers make), and for one whose `__setstate__` only
// computes; otherwise an error naming the class and the operator (or the call it could
// not follow, or why the code could not be compiled) — the module is then never loaded.
//
// LibTorch-facing: include only from gpu/'s LibTorch sources.

#include <string>
#include <string_view>

#include "base/result.hpp"

namespace ks {

// `module_bytes`: a .pt archive as torch::jit::save writes it. Bytes that are no zip
// archive pass (torch::jit::load refuses them in its own words), but a flatbuffer
// module, which it would load by another path, is refused.
status check_module_load_code(std::string_view module_bytes);

}  // namespace ks
