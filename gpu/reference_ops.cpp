#include "gpu/reference_ops.hpp"

#include <map>
#include <sstream>

namespace ks {

namespace {

// The operators a reference may not use, and why. Everything else in aten:: and prim::
// computes on values.
const std::map<std::string, std::string>& refused_ops() {
  static const std::map<std::string, std::string> refused = {
      {"aten::from_file", "reads a file"},
      {"aten::save", "writes a file"},
      {"aten::load", "reads a file"},
      {"prim::Print", "prints (a reference may not write to the worker's output)"},
      {"aten::warn", "prints (a reference may not write to the worker's output)"},
      {"prim::PythonOp", "calls Python"},
  };
  return refused;
}

std::string where(const torch::jit::Node& n) {
  std::string text = n.sourceRange().text().str();
  auto nl = text.find('\n');
  if (nl != std::string::npos) text = text.substr(0, nl);
  return text.empty() ? "" : " (at \"" + text.substr(0, 120) + "\")";
}

status check_block(const torch::jit::Block& block) {
  for (const torch::jit::Node* n : block.nodes()) {
    const std::string name = n->kind().toQualString();
    const std::string ns = n->kind().is_aten() ? "aten" : n->kind().is_prim() ? "prim" : "other";
    auto refused = refused_ops().find(name);
    if (refused != refused_ops().end())
      return error{"the reference uses " + name + ", which " + refused->second + where(*n) +
                   "; references may only compute"};
    if (ns == "other")
      return error{"the reference uses " + name + where(*n) +
                   ": only LibTorch's own aten:: and prim:: operators may run in a reference"};
    for (const torch::jit::Block* sub : n->blocks())
      if (auto st = check_block(*sub); !st) return st;
  }
  return {};
}

}  // namespace

status check_reference_ops(const torch::jit::Graph& graph) { return check_block(*graph.block()); }

}  // namespace ks
