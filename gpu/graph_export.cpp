// The second LibTorch script-header translation unit of the worker (with
// torch_reference.cpp): TorchScript graph passes and the interpreter.
#include "gpu/graph_export.hpp"

#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/jit.h>
#include <torch/script.h>

#include "gpu/reference_ops.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "model/json_codec.hpp"

namespace ks {

namespace {

nlohmann::json describe(const c10::IValue& v) {
  nlohmann::json j;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    j["type"] = "Tensor";
    j["shape"] = t.sizes().vec();
    j["dtype"] = dtype_name(t.scalar_type());
  } else if (v.isBool()) {
    j["type"] = "bool";
    j["value"] = v.toBool();
  } else if (v.isInt()) {
    j["type"] = "int";
    j["value"] = v.toInt();
  } else if (v.isDouble()) {
    j["type"] = "float";
    j["value"] = double_to_json(v.toDouble());
  } else if (v.isString()) {
    j["type"] = "str";
    j["value"] = v.toStringRef();
  } else if (v.isNone()) {
    j["type"] = "None";
  } else if (v.isIntList()) {
    j["type"] = "int[]";
    j["value"] = v.toIntVector();
  } else if (v.isDoubleList()) {
    j["type"] = "float[]";
    nlohmann::json values = nlohmann::json::array();
    for (double x : v.toDoubleVector()) values.push_back(double_to_json(x));
    j["value"] = values;
  } else if (v.isBoolList()) {
    j["type"] = "bool[]";
    std::vector<bool> b;
    for (bool x : v.toBoolList()) b.push_back(x);
    j["value"] = b;
  } else if (v.isTensorList()) {
    j["type"] = "Tensor[]";
    nlohmann::json shapes = nlohmann::json::array();
    for (const at::Tensor& t : v.toTensorVector()) shapes.push_back(t.sizes().vec());
    j["shapes"] = shapes;
  } else if (v.isScalar()) {
    j["type"] = "float";
    j["value"] = double_to_json(v.toScalar().toDouble());
  } else {
    j["type"] = v.tagKind();
  }
  return j;
}

}  // namespace

result<std::string> export_graph_json(const task_spec& task) {
  const std::string prefix = "task \"" + task.name + "\": graph export: ";
  try {
    std::shared_ptr<torch::jit::Graph> graph;
    if (!task.torchscript.empty()) {
      auto unit = torch::jit::compile(task.torchscript);
      torch::jit::Function* forward = nullptr;
      for (torch::jit::Function* f : unit->get_functions())
        if (f->name() == "forward") forward = f;
      if (!forward) return error{prefix + "the TorchScript defines no function named forward"};
      graph = torch::jit::toGraphFunction(*forward).graph()->copy();
      torch::jit::Inline(*graph);
    } else {
      // A saved module: its forward's graph, once `self` is gone. A module whose
      // forward reads its own attributes (parameters, submodules) has no such graph.
      std::istringstream bytes(task.module_bytes);
      torch::jit::Module module = torch::jit::load(bytes, c10::Device(c10::kCPU));
      graph = module.get_method("forward").graph()->copy();
      torch::jit::Inline(*graph);
      if (graph->inputs().empty() || !graph->inputs()[0]->uses().empty())
        return error{prefix + "the module's forward reads its own attributes (parameters or "
                              "submodules); only a stateless module exports to a graph. Give the "
                              "reference as TorchScript source with `parameters:` instead"};
      graph->eraseInput(0);
    }
    // Before anything runs it: constant propagation would already execute a file read.
    if (auto allowed = check_reference_ops(*graph); !allowed) return error{prefix + allowed.message()};
    torch::jit::ConstantPropagation(graph);
    torch::jit::EliminateDeadCode(graph);

    // Run a copy whose outputs are every value of the graph: the interpreter then
    // hands back each value's runtime form, from which shapes and constants are read.
    std::shared_ptr<torch::jit::Graph> probe = graph->copy();
    std::vector<torch::jit::Value*> values;  // of `graph`, in the order probed
    auto g_nodes = graph->nodes();
    auto p_nodes = probe->nodes();
    auto gi = g_nodes.begin();
    for (auto pi = p_nodes.begin(); pi != p_nodes.end(); ++pi, ++gi) {
      for (size_t o = 0; o < (*pi)->outputs().size(); ++o) {
        probe->registerOutput((*pi)->outputs()[o]);
        values.push_back((*gi)->outputs()[o]);
      }
    }
    size_t first_probe = graph->outputs().size();

    auto inputs = make_inputs(task, trial_seed(task.seed, 0), c10::Device(c10::kCPU));
    if (!inputs) return error{prefix + inputs.message()};
    auto params = make_parameters(task, c10::Device(c10::kCPU));
    if (!params) return error{prefix + params.message()};
    torch::jit::Stack stack;
    for (auto& t : *inputs) stack.emplace_back(t);
    for (auto& t : *params) stack.emplace_back(t);
    std::vector<c10::IValue> arguments(stack.begin(), stack.end());
    if (arguments.size() != graph->inputs().size())
      return error{prefix + "forward takes " + std::to_string(graph->inputs().size()) +
                   " arguments, the task declares " + std::to_string(arguments.size())};
    {
      torch::NoGradGuard no_grad;
      torch::jit::Code code(probe, "forward");
      torch::jit::InterpreterState state(code);
      state.run(stack);
    }
    if (stack.size() != first_probe + values.size())
      return error{prefix + "the probe returned " + std::to_string(stack.size()) + " values, expected " +
                   std::to_string(first_probe + values.size())};

    nlohmann::json out;
    out["task"] = task.name;
    nlohmann::json vals = nlohmann::json::object();
    nlohmann::json ins = nlohmann::json::array();
    std::vector<std::string> names;
    for (auto& t : task.inputs) names.push_back(t.name);
    for (auto& t : task.parameters) names.push_back(t.name);
    for (size_t i = 0; i < graph->inputs().size(); ++i) {
      const std::string id = graph->inputs()[i]->debugName();
      vals[id] = describe(arguments[i]);
      ins.push_back({{"value", id}, {"name", names[i]}});
    }
    out["inputs"] = ins;
    for (size_t i = 0; i < values.size(); ++i) vals[values[i]->debugName()] = describe(stack[first_probe + i]);
    // Constants stay marked so a reader can tell a literal from a computed scalar.
    for (torch::jit::Node* n : graph->nodes())
      if (n->kind() == torch::jit::prim::Constant) vals[n->output()->debugName()]["constant"] = true;
    out["values"] = vals;
    nlohmann::json outs = nlohmann::json::array();
    for (auto* v : graph->outputs()) outs.push_back(v->debugName());
    out["outputs"] = outs;
    nlohmann::json nodes = nlohmann::json::array();
    for (torch::jit::Node* n : graph->nodes()) {
      if (n->kind() == torch::jit::prim::Constant) continue;  // its value is in "values"
      nlohmann::json jn;
      jn["kind"] = n->kind().toQualString();
      nlohmann::json in = nlohmann::json::array(), o = nlohmann::json::array();
      for (auto* v : n->inputs()) in.push_back(v->debugName());
      for (auto* v : n->outputs()) o.push_back(v->debugName());
      jn["inputs"] = in;
      jn["outputs"] = o;
      if (n->maybeSchema()) jn["schema"] = toString(n->schema());
      nodes.push_back(jn);
    }
    out["nodes"] = nodes;
    return out.dump(1);
  } catch (const std::exception& e) {
    return error{prefix + torch_message(e)};
  }
}

}  // namespace ks
