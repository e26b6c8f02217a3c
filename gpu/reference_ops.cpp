#include "gpu/reference_ops.hpp"

#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include <torch/csrc/jit/api/function_impl.h>

#include "gpu/embedded_reference_ops.hpp"

namespace ks {

namespace {

// Operators refused by name, with the reason the error gives. They are also kept out
// of the allow-list (gpu/reference_ops_allowed.py's DENIED); naming them here gives a
// better message than "not among the operators".
const std::map<std::string, std::string>& refused_ops() {
  static const std::map<std::string, std::string> refused = {
      {"aten::from_file", "reads a file"},
      {"aten::save", "writes a file"},
      {"aten::load", "reads a file"},
      {"prim::Print", "prints (a reference may not write to the worker's output)"},
      {"aten::warn", "prints (a reference may not write to the worker's output)"},
      {"prim::PythonOp", "calls Python"},
      {"prim::IgnoredPythonOp", "calls Python"},
      {"prim::rpc_async", "reaches other processes"},
      {"prim::rpc_sync", "reaches other processes"},
      {"prim::rpc_remote", "reaches other processes"},
      {"aten::set_", "points a tensor at raw storage"},
      {"aten::set_data", "points a tensor at raw storage"},
  };
  return refused;
}

// gpu/reference_ops_allowed.txt, embedded at build time: one operator a line.
const std::unordered_set<std::string>& allowed_ops() {
  static const std::unordered_set<std::string> allowed = [] {
    std::unordered_set<std::string> out;
    std::istringstream in{std::string(embedded_reference_ops_allowed())};
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') out.insert(line);
    return out;
  }();
  return allowed;
}

std::string where(const torch::jit::Node& n) {
  std::string text = n.sourceRange().text().str();
  auto nl = text.find('\n');
  if (nl != std::string::npos) text = text.substr(0, nl);
  return text.empty() ? "" : " (at \"" + text.substr(0, 120) + "\")";
}

// Walks a graph and everything it can run: nested blocks (if, loop, closures), graph
// attributes (prim::fork's and prim::awaitable's Subgraph, fusion groups), and the
// graphs of the functions and methods it calls (a call inside a fork's subgraph is not
// inlined). Each graph once.
class op_checker {
 public:
  status graph(const torch::jit::Graph& g, const std::string& context) {
    if (!seen_.insert(&g).second) return {};
    return block(*g.block(), context);
  }

 private:
  status block(const torch::jit::Block& b, const std::string& context) {
    for (const torch::jit::Node* n : b.nodes())
      if (auto st = node(*n, context); !st) return st;
    return {};
  }

  status node(const torch::jit::Node& n, const std::string& context) {
    const std::string name = n.kind().toQualString();
    const bool ours = n.kind().is_aten() || n.kind().is_prim();
    auto refused = refused_ops().find(name);
    if (refused != refused_ops().end())
      return error{"the reference uses " + name + ", which " + refused->second + where(n) + context +
                   "; references may only compute"};
    if (!ours)
      return error{"the reference uses " + name + where(n) + context +
                   ": only LibTorch's own aten:: and prim:: operators may run in a reference"};
    if (!allowed_ops().count(name))
      return error{"the reference uses " + name + where(n) + context +
                   ", which is not among the operators a reference may use (the operators that "
                   "compute, listed in gpu/reference_ops_allowed.txt)"};
    for (const torch::jit::Block* sub : n.blocks())
      if (auto st = block(*sub, context); !st) return st;
    for (torch::jit::Symbol a : n.attributeNames()) {
      if (n.kindOf(a) == torch::jit::AttributeKind::g) {
        if (auto st = graph(*n.g(a), " in the graph " + name + " runs" + where(n) + context); !st) return st;
      } else if (n.kindOf(a) == torch::jit::AttributeKind::gs) {
        for (const auto& g : n.gs(a))
          if (auto st = graph(*g, " in a graph " + name + " runs" + where(n) + context); !st) return st;
      }
    }
    return callees(n, name, context);
  }

  // The code a call runs: a function's graph, an object's method (prim::CallMethod,
  // and the __enter__ / __exit__ of a with-statement).
  status callees(const torch::jit::Node& n, const std::string& name, const std::string& context) {
    std::vector<std::string> methods;
    if (name == "prim::CallMethod")
      methods.push_back(n.s(torch::jit::attr::name));
    else if (name == "prim::Enter")
      methods.push_back("__enter__");
    else if (name == "prim::Exit")
      methods.push_back("__exit__");
    if (name == "prim::CallFunction") {
      auto fn_type = n.inputs().at(0)->type()->cast<c10::FunctionType>();
      if (!fn_type || !fn_type->function())
        return error{"the reference calls a function whose code cannot be checked" + where(n) + context};
      return function(*fn_type->function(), context);
    }
    if (methods.empty()) return {};
    auto cls = n.inputs().at(0)->type()->cast<c10::ClassType>();
    if (!cls)
      return error{"the reference calls " + methods[0] + " on a value of type " + n.inputs().at(0)->type()->str() +
                   where(n) + context + ": only methods of known classes can be checked (not through an interface)"};
    for (const std::string& m : methods) {
      torch::jit::Function* fn = cls->findMethod(m);
      if (!fn)
        return error{"the reference calls " + cls->repr_str() + "." + m + ", which has no code to check" + where(n) +
                     context};
      if (auto st = function(*fn, context); !st) return st;
    }
    return {};
  }

  status function(torch::jit::Function& fn, const std::string& context) {
    const std::string in = " in " + fn.qualname().qualifiedName() + context;
    if (!fn.isGraphFunction())
      return error{"the reference calls " + fn.qualname().qualifiedName() + context +
                   ", a built-in function whose code cannot be checked"};
    return graph(*torch::jit::toGraphFunction(fn).graph(), in);
  }

  std::set<const torch::jit::Graph*> seen_;
};

}  // namespace

status check_reference_ops(const torch::jit::Graph& graph) { return op_checker().graph(graph, ""); }

bool reference_op_allowed(const std::string& name) { return !refused_ops().count(name) && allowed_ops().count(name); }

}  // namespace ks
