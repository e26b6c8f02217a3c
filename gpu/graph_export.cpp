// The second LibTorch script-header translation unit of the worker (with
// torch_reference.cpp): TorchScript graph passes and the interpreter.
#include "gpu/graph_export.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <sys/resource.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/cuda.h>
#include <torch/jit.h>
#include <torch/library.h>
#include <torch/script.h>

#include "gpu/bytes_stream.hpp"
#include "gpu/module_load_check.hpp"
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

// Every node of a graph, nested blocks included, in order.
void each_node(torch::jit::Block* block, const std::function<void(torch::jit::Node*)>& f) {
  for (torch::jit::Node* n : block->nodes()) {
    f(n);
    for (torch::jit::Block* b : n->blocks()) each_node(b, f);
  }
}

// A saved module's inlined forward, `self` taken out: each tensor attribute it reads
// becomes the graph input of the task parameter that mirrors it ({kind: module, attr}),
// appended in the task's order; other attributes (ints, floats, flags such as
// `training`) become constants. Fails naming a tensor attribute the task does not
// declare.
status lift_module_attributes(torch::jit::Graph& graph, const torch::jit::Module& module,
                                    const task_spec& task) {
  std::vector<torch::jit::Value*> param_inputs;
  for (const auto& p : task.parameters) {
    param_inputs.push_back(graph.addInput(p.name));
  }
  std::map<torch::jit::Value*, std::pair<c10::IValue, std::string>> objects;  // value -> (object, path)
  objects[graph.inputs()[0]] = {module._ivalue(), ""};
  std::vector<torch::jit::Node*> reads;
  std::optional<std::string> failure;
  // The tensor each task parameter mirrors, where its path names one.
  std::vector<at::Tensor> mirrored;
  for (const auto& p : task.parameters) {
    c10::IValue at = module._ivalue();
    std::stringstream path(p.init.attr);
    std::string part;
    while (!p.init.attr.empty() && std::getline(path, part, '.') && at.isObject() && at.toObjectRef().type()->hasAttribute(part))
      at = at.toObjectRef().getAttr(part);
    mirrored.push_back(at.isTensor() && !p.init.attr.empty() ? at.toTensor() : at::Tensor());
  }
  // The parameters whose tensors a list attribute holds, in its order; none where it
  // holds anything else, or a tensor no parameter mirrors.
  auto parameters_held = [&](const c10::IValue& v) -> std::optional<std::vector<size_t>> {
    if (!v.isList() || v.toListRef().empty()) return std::nullopt;
    std::vector<size_t> out;
    for (const c10::IValue& x : v.toListRef()) {
      if (!x.isTensor()) return std::nullopt;
      const at::Tensor& t = x.toTensor();
      size_t k = 0;
      auto same = [&](const at::Tensor& m) {  // one tensor, whichever handle holds it
        if (!m.defined()) return false;
        if (m.is_same(t)) return true;
        // Data pointers tell tensors apart only where there is data (not on meta).
        return !t.is_meta() && m.data_ptr() == t.data_ptr() && m.sizes() == t.sizes() &&
               m.strides() == t.strides() && m.scalar_type() == t.scalar_type();
      };
      while (k < mirrored.size() && !same(mirrored[k])) ++k;
      if (k == mirrored.size()) return std::nullopt;
      out.push_back(k);
    }
    return out;
  };
  each_node(graph.block(), [&](torch::jit::Node* n) {
    if (failure || n->kind() != torch::jit::prim::GetAttr) return;
    auto it = objects.find(n->input());
    if (it == objects.end()) return;
    const std::string name = n->s(torch::jit::attr::name);
    const std::string path = it->second.second.empty() ? name : it->second.second + "." + name;
    c10::IValue v = it->second.first.toObjectRef().getAttr(name);
    reads.push_back(n);
    if (v.isObject()) {
      objects[n->output()] = {v, path};
    } else if (v.isTensor()) {
      size_t k = 0;
      while (k < task.parameters.size() && task.parameters[k].init.attr != path) ++k;
      if (k == task.parameters.size()) {
        failure = "the module's forward reads tensor attribute \"" + path +
                  "\", which the task does not declare as a parameter ({kind: module, attr: " + path + "})";
        return;
      }
      n->output()->replaceAllUsesWith(param_inputs[k]);
    } else if (auto held = parameters_held(v)) {
      // A list of the module's own tensors (a scripted recurrent layer's _flat_weights):
      // the list of the parameters that mirror them, built in the graph.
      torch::jit::WithInsertPoint guard(n);
      std::vector<torch::jit::Value*> items;
      for (size_t k : *held) items.push_back(param_inputs[k]);
      n->output()->replaceAllUsesWith(graph.insertNode(graph.createList(c10::TensorType::get(), items))->output());
    } else {
      torch::jit::WithInsertPoint guard(n);
      auto c = graph.insertConstant(v);
      n->output()->replaceAllUsesWith(c);
    }
  });
  if (failure) return error{*failure};
  for (auto it = reads.rbegin(); it != reads.rend(); ++it)
    if (!(*it)->output()->hasUses()) (*it)->destroy();
  if (graph.inputs()[0]->hasUses())
    return error{"the module's forward uses the module itself beyond reading attributes"};
  graph.eraseInput(0);
  return status::success();
}

// In place ops on a parameter whose result nothing reads (BatchNorm's step counter in
// training mode) update the module's state, not the output: a kernel need not repeat
// them, nor the running statistics a training-mode norm updates.
void drop_state_updates(torch::jit::Graph& graph, size_t first_parameter) {
  std::set<torch::jit::Value*> params(graph.inputs().begin() + first_parameter, graph.inputs().end());
  std::vector<torch::jit::Node*> dead;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    std::string kind = n->kind().toUnqualString();
    if (n->kind().is_aten() && !kind.empty() && kind.back() == '_' && n->inputs().size() > 0 &&
        params.count(n->inputs()[0]) && n->outputs().size() == 1 && !n->output()->hasUses())
      dead.push_back(n);
  });
  for (auto* n : dead) n->destroy();
  // Normalisations on batch statistics (BatchNorm in training mode, InstanceNorm) read
  // their running statistics only to update them: the output does not depend on them.
  std::vector<torch::jit::Node*> norms;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    const std::string kind = n->kind().toQualString();
    if ((kind == "aten::batch_norm" || kind == "aten::instance_norm") && n->inputs().size() >= 6) {
      auto flag = torch::jit::toIValue(n->inputs()[5]);
      if (flag && flag->isBool() && flag->toBool() && params.count(n->inputs()[3])) norms.push_back(n);
    }
  });
  for (torch::jit::Node* n : norms) {
    torch::jit::WithInsertPoint guard(n);
    torch::jit::Value* none = graph.insertConstant(c10::IValue());
    n->replaceInput(3, none);
    n->replaceInput(4, none);
  }
}

// A list grown in the forward (features.append(y); torch.cat(features, 1), as
// DenseNet's blocks do) as the list it holds at each read: every reader gets a list
// built of the elements appended before it, and the appends go. Only a list built and
// grown at the top level and changed by nothing but appends (TorchScript's own
// RemoveListMutation leaves a list that is read between its appends). Returns whether
// anything changed.
bool functional_appends(torch::jit::Graph& graph) {
  static const std::set<std::string> mutating = {"aten::append", "aten::insert", "aten::pop", "aten::_set_item",
                                                 "aten::clear", "aten::extend", "aten::remove", "aten::reverse",
                                                 "aten::sort", "aten::add_", "aten::__setitem__"};
  std::vector<torch::jit::Node*> lists;
  for (torch::jit::Node* n : graph.nodes())
    if (n->kind() == torch::jit::prim::ListConstruct) lists.push_back(n);
  bool changed = false;
  for (torch::jit::Node* l : lists) {
    torch::jit::Value* list = l->output();
    bool appends = false, plain = true;
    for (const torch::jit::Use& u : list->uses()) {
      const std::string kind = u.user->kind().toQualString();
      const bool append = kind == "aten::append" && u.offset == 0 && !u.user->output()->hasUses();
      appends = appends || append;
      plain = plain && u.user->owningBlock() == graph.block() && (append || !mutating.count(kind)) &&
              u.user->kind() != torch::jit::prim::Return;
    }
    if (!appends || !plain) continue;
    std::vector<torch::jit::Value*> held(l->inputs().begin(), l->inputs().end());
    std::vector<torch::jit::Node*> readers, gone;
    for (torch::jit::Node* n = l->next(); n != graph.return_node(); n = n->next()) {
      bool reads = false;
      for (torch::jit::Value* v : n->inputs()) reads = reads || v == list;
      if (!reads) continue;
      if (std::string(n->kind().toQualString()) == "aten::append") {
        held.push_back(n->inputs()[1]);
        gone.push_back(n);
        continue;
      }
      torch::jit::WithInsertPoint guard(n);
      torch::jit::Node* now = graph.insertNode(graph.createList(l->output()->type()->expect<c10::ListType>()->getElementType(), held));
      for (size_t k = 0; k < n->inputs().size(); ++k)
        if (n->inputs()[k] == list) n->replaceInput(k, now->output());
    }
    for (torch::jit::Node* n : gone) n->destroy();
    if (!list->hasUses()) l->destroy();
    changed = true;
  }
  return changed;
}

// copy_ into a tensor that is no value computed in the forward (a graph input: module
// state a task parameter mirrors, or a constant: a traced module's plain tensor
// attribute), such as level 3's 33_VanillaRNN's `self.hidden.copy_(initial_hidden)`:
// what reads it afterwards reads `src` broadcast to its shape in its dtype, which
// to(expand_as(src, dst), dst.dtype) computes without writing anything. Reads before the
// copy keep the old value. Returns the nodes made (specialise_to_shapes drops them where
// the shapes and dtypes already agree).
std::set<torch::jit::Node*> functional_copies(torch::jit::Graph& graph) {
  std::set<torch::jit::Node*> made;
  std::vector<torch::jit::Node*> copies;
  for (torch::jit::Node* n : graph.nodes())
    if (std::string(n->kind().toQualString()) == "aten::copy_" && n->inputs().size() >= 2) {
      torch::jit::Value* dst = n->inputs()[0];
      const bool state = dst->node()->kind() == torch::jit::prim::Constant || dst->node() == graph.param_node();
      if (state && dst->type()->cast<c10::TensorType>()) copies.push_back(n);
    }
  for (torch::jit::Node* n : copies) {
    torch::jit::Value *dst = n->inputs()[0], *src = n->inputs()[1];
    torch::jit::WithInsertPoint guard(n);
    torch::jit::Value* wide = graph.insert(c10::Symbol::fromQualString("aten::expand_as"), {src, dst});
    // to(dtype), not type_as: type_as moves to the other's device too, which would take
    // the probe off the meta device where dst is a constant.
    torch::jit::Value* dtype = graph.insert(torch::jit::prim::dtype, {dst});
    torch::jit::Value* typed = graph.insert(c10::Symbol::fromQualString("aten::to"),
                                            {wide, dtype, graph.insertConstant(false), graph.insertConstant(false),
                                             graph.insertConstant(c10::IValue())});
    made.insert(wide->node());
    made.insert(typed->node());
    // Every later read of dst in this block, and the copy's own result.
    std::vector<torch::jit::Use> later;
    for (const torch::jit::Use& u : dst->uses())
      if (u.user != n && u.user != wide->node() && u.user != dtype->node() && u.user->owningBlock() == n->owningBlock() &&
          n->isBefore(u.user))
        later.push_back(u);
    for (const torch::jit::Use& u : later) u.user->replaceInput(u.offset, typed);
    n->output()->replaceAllUsesWith(typed);
    n->destroy();
  }
  return made;
}

// Whether a list argument holds a number computed in the forward (x.view(x.size(0), -1),
// torch.randn(layers, x.size(0), hidden)): the library steps' arguments are fixed text,
// so such a graph is specialised to the task's shapes too (as a graph with control
// flow is), which makes those numbers constants.
bool has_computed_lists(torch::jit::Graph& graph) {
  bool found = false;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    if (n->kind() != torch::jit::prim::ListConstruct) return;
    for (torch::jit::Value* v : n->inputs())
      found = found || (v->type()->kind() == c10::TypeKind::IntType && v->node()->kind() != torch::jit::prim::Constant);
  });
  return found;
}

// Specialises a graph with control flow to the task's shapes: the rank, sizes and
// element count of every graph input are known, so shape checks (`if x.dim() != 4:
// raise ...`, the loops that multiply sizes) fold away. Only the inputs' shapes are
// used, never values, so what remains computes the same at these shapes. Also
// replaces broadcast_tensors of same-shaped inputs by the inputs. Graphs without
// control flow are left as they are.
bool has_control_flow(torch::jit::Graph& graph) {
  bool found = false;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    found = found || n->kind() == torch::jit::prim::If || n->kind() == torch::jit::prim::Loop ||
            n->kind() == torch::jit::prim::ListUnpack;
  });
  return found;
}

// A tensor cut into pieces and unpacked (q, k, v = x.split(n, dim=2); chunk; unbind)
// at a known shape: each piece as aten::slice (aten::select for unbind) of the tensor,
// ops the rules coder reads as views. Returns whether `u` was so replaced.
bool unpack_pieces(torch::jit::Graph& graph, torch::jit::Node* u, torch::jit::Node* b,
                   const std::function<const std::vector<int64_t>*(torch::jit::Value*)>& lookup) {
  const std::string kind = b->kind().toQualString();
  if (kind != "aten::split" && kind != "aten::split_with_sizes" && kind != "aten::chunk" && kind != "aten::unbind")
    return false;
  if (b->inputs().size() < 2 || b->outputs().size() != 1 || b->output()->uses().size() != 1) return false;
  const std::vector<int64_t>* shape = lookup(b->inputs()[0]);
  auto constant = [&](size_t k) -> c10::optional<c10::IValue> {
    if (k >= b->inputs().size()) return c10::nullopt;
    return torch::jit::toIValue(b->inputs()[k]);
  };
  const auto dim_value = constant(kind == "aten::unbind" ? 1 : 2);
  if (!shape || !dim_value || !dim_value->isInt()) return false;
  const int64_t rank = static_cast<int64_t>(shape->size());
  int64_t dim = dim_value->toInt();
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return false;
  const int64_t size = (*shape)[static_cast<size_t>(dim)];
  std::vector<int64_t> lengths;  // each piece's length along dim (unbind: none)
  if (kind == "aten::split" || kind == "aten::chunk") {
    auto n = constant(1);
    if (!n || !n->isInt() || n->toInt() <= 0) return false;
    // chunk(c): pieces of ceil(size / c), as ATen cuts them
    const int64_t step = kind == "aten::split" ? n->toInt() : (size + n->toInt() - 1) / n->toInt();
    for (int64_t at = 0; step > 0 && at < size; at += step) lengths.push_back(std::min(step, size - at));
  } else if (kind == "aten::split_with_sizes") {
    auto n = constant(1);
    if (!n || !n->isIntList()) return false;
    lengths = n->toIntVector();
  }
  const size_t pieces = kind == "aten::unbind" ? static_cast<size_t>(size) : lengths.size();
  if (pieces != u->outputs().size()) return false;
  torch::jit::WithInsertPoint guard(u);
  int64_t at = 0;
  for (size_t i = 0; i < pieces; ++i) {
    torch::jit::Value* piece;
    if (kind == "aten::unbind") {
      piece = graph.insert(c10::Symbol::fromQualString("aten::select"),
                           {b->inputs()[0], graph.insertConstant(dim), graph.insertConstant(static_cast<int64_t>(i))});
    } else {
      piece = graph.insert(c10::Symbol::fromQualString("aten::slice"),
                           {b->inputs()[0], graph.insertConstant(dim), graph.insertConstant(at),
                            graph.insertConstant(at + lengths[i]), graph.insertConstant(static_cast<int64_t>(1))});
      at += lengths[i];
    }
    u->outputs()[i]->replaceAllUsesWith(piece);
  }
  u->destroy();
  b->destroy();
  return true;
}

// Shapes known without looking at values, keyed by Value::unique() (never reused,
// unlike addresses): `known` comes from the probe; a tensor downstream of an op whose
// output shape depends on values (nonzero, masked_select, unique, …) is left out.
using shape_map = std::map<size_t, std::vector<int64_t>>;

// Dtypes of the probed tensors and the graph's inputs, by Value::unique(): never
// value-dependent.
using dtype_map = std::map<size_t, c10::ScalarType>;

// Whether every use of `v` is an op's device argument (`torch.randn(..., device=x.device)`,
// `h0.to(x.device)`): there a tensor's device stays a value, so that a probe on meta or
// the CPU makes its tensors where its inputs are (folded to the GPU, the probe would
// reach for CUDA), and the library step runs on the plan's device.
bool only_device_arguments(torch::jit::Value* v) {
  for (const torch::jit::Use& u : v->uses()) {
    const c10::FunctionSchema* schema = u.user->maybeSchema();
    if (!schema || u.offset >= schema->arguments().size()) return false;
    // By name: `x.device.type` reads a Device too (prim::type's `self`).
    if (schema->arguments()[u.offset].name() != "device") return false;
  }
  return true;
}

// Besides the shapes, what a graph can ask of a tensor that the task fixes: its layout
// (strided: tasks and plans use dense tensors), its device (the GPU the kernel is
// written for: torch.norm in PyTorch 2.x branches on `input.device.type` before it picks
// linalg.vector_norm) and its dtype.
void specialise_to_shapes(std::shared_ptr<torch::jit::Graph> g, const shape_map& shapes, const dtype_map& dtypes,
                          const std::set<torch::jit::Node*>& copies = {}) {
  torch::jit::Graph& graph = *g;
  // A value a fold lifted out of a branch was not probed; an unchecked_cast (an Optional
  // tensor known to be one) has the shape of what it casts.
  auto lookup = [&](torch::jit::Value* v) -> const std::vector<int64_t>* {
    while (v->node()->kind() == torch::jit::prim::unchecked_cast && !shapes.count(v->unique())) v = v->node()->input();
    auto it = shapes.find(v->unique());
    return it == shapes.end() ? nullptr : &it->second;
  };
  for (int round = 0; round < 4; ++round) {
    bool changed = false;
    // unchecked_cast of a value already of the type it casts to (nn.GRU's `hx` once its
    // branches fold: an Optional argument that the caller passes as a tensor) is that
    // value, as TorchScript's peephole pass has it; then `is None` of it folds too.
    std::vector<torch::jit::Node*> casts;
    each_node(graph.block(), [&](torch::jit::Node* n) {
      if (n->kind() == torch::jit::prim::unchecked_cast &&
          c10::unshapedType(n->input()->type())->isSubtypeOf(*c10::unshapedType(n->output()->type())))
        casts.push_back(n);
    });
    for (torch::jit::Node* n : casts) {
      n->output()->replaceAllUsesWith(n->input());
      n->destroy();
      changed = true;
    }
    // A move to the device the task runs on (`h0.to(x.device)`; a traced
    // `torch.tensor(100.)`, moved to where its input is) moves nothing: a tensor of the
    // task is there already, and a 0-dim constant mixes with any device. Without the
    // move the probe on the CPU does not reach for the GPU, and a moved constant stays
    // a constant.
    std::vector<torch::jit::Node*> moves;
    each_node(graph.block(), [&](torch::jit::Node* n) {
      if (std::string(n->kind().toQualString()) != "aten::to" || !n->maybeSchema()) return;
      auto at = n->schema().argumentIndexWithName("device");
      if (!at || static_cast<size_t>(*at) >= n->inputs().size()) return;
      torch::jit::Value* device = n->inputs()[*at];
      auto d = torch::jit::toIValue(device);
      if ((d && d->isDevice()) || device->node()->kind() == torch::jit::prim::device) moves.push_back(n);
    });
    for (torch::jit::Node* n : moves) {
      const size_t at = *n->schema().argumentIndexWithName("device");
      torch::jit::WithInsertPoint guard(n);
      auto none = [&](size_t i) { return i < n->inputs().size() && n->inputs()[i]->type()->kind() == c10::TypeKind::NoneType; };
      auto is_false = [&](size_t i) {
        auto c = i < n->inputs().size() ? torch::jit::toIValue(n->inputs()[i]) : c10::nullopt;
        return c && c->isBool() && !c->toBool();
      };
      if (n->schema().overload_name() == "prim_Device" && none(2) && is_false(4)) {
        n->output()->replaceAllUsesWith(n->inputs()[0]);  // to(self, device): self
        n->destroy();
      } else if (n->schema().arguments()[at].type()->kind() == c10::TypeKind::OptionalType) {
        n->replaceInput(at, graph.insertConstant(c10::IValue()));  // to(device=None, ...): stays
      } else {
        // to(self, device, dtype, non_blocking, copy, memory_format): to(self, dtype, ...)
        std::vector<torch::jit::NamedValue> args;
        for (size_t i = 0; i < n->inputs().size(); ++i)
          if (i != at) args.emplace_back(n->inputs()[i]);
        n->output()->replaceAllUsesWith(graph.insert(n->kind(), args));
        n->destroy();
      }
      changed = true;
    }
    std::vector<std::pair<torch::jit::Node*, c10::IValue>> folds;
    each_node(graph.block(), [&](torch::jit::Node* n) {
      if (n->inputs().empty()) return;
      if (n->inputs().size() == 1 && n->input()->type()->cast<c10::TensorType>()) {
        std::optional<c10::IValue> fixed;
        if (n->kind() == c10::Symbol::fromQualString("prim::layout"))
          fixed = static_cast<int64_t>(at::kStrided);
        else if (n->kind() == torch::jit::prim::device && !only_device_arguments(n->output()))
          fixed = c10::Device(c10::kCUDA, 0);
        else if (n->kind() == c10::Symbol::fromQualString("prim::is_cuda"))
          fixed = true;
        else if (n->kind() == c10::Symbol::fromQualString("prim::is_nested"))
          fixed = false;
        else if (n->kind() == torch::jit::prim::dtype && dtypes.count(n->input()->unique()))
          fixed = static_cast<int64_t>(dtypes.at(n->input()->unique()));
        if (fixed) {
          folds.emplace_back(n, *fixed);
          return;
        }
      }
      // `h is None` of a value typed Tensor (an Optional argument of nn.GRU's forward,
      // inlined where the caller passes a tensor), or a tuple (nn.LSTM's `(h0, c0)`):
      // never None.
      const std::string qual = n->kind().toQualString();
      if ((qual == "aten::__is__" || qual == "aten::__isnot__") && n->inputs().size() == 2) {
        auto tensor = [](torch::jit::Value* v) {
          return v->type()->cast<c10::TensorType>() != nullptr || v->type()->kind() == c10::TypeKind::TupleType;
        };
        auto none = [](torch::jit::Value* v) { return v->type()->kind() == c10::TypeKind::NoneType; };
        torch::jit::Value *a = n->inputs()[0], *b = n->inputs()[1];
        if ((tensor(a) && none(b)) || (none(a) && tensor(b))) {
          folds.emplace_back(n, qual == "aten::__isnot__");
          return;
        }
        // `query is key` of one value (nn.MultiheadAttention's self-attention checks):
        // one object. Values that differ may still be one object: left as they are.
        if (a == b) {
          folds.emplace_back(n, qual == "aten::__is__");
          return;
        }
      }
      const std::vector<int64_t>* known = lookup(n->inputs()[0]);
      if (!known) return;
      const auto& shape = *known;
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      const std::string kind = n->kind().toQualString();
      if (kind == "aten::dim" && n->inputs().size() == 1) {
        folds.emplace_back(n, static_cast<int64_t>(shape.size()));
      } else if (kind == "aten::numel" && n->inputs().size() == 1) {
        folds.emplace_back(n, numel);
      } else if ((kind == "aten::size" || kind == "aten::sizes") && n->inputs().size() == 1) {
        folds.emplace_back(n, c10::IValue(shape));
      } else if (kind == "aten::size" && n->inputs().size() == 2) {
        auto d = torch::jit::toIValue(n->inputs()[1]);
        if (d && d->isInt()) {
          int64_t k = d->toInt(), r = static_cast<int64_t>(shape.size());
          if (k < 0) k += r;
          if (k >= 0 && k < r) folds.emplace_back(n, shape[k]);
        }
      }
    });
    for (auto& [n, v] : folds) {
      torch::jit::WithInsertPoint guard(n);
      n->output()->replaceAllUsesWith(graph.insertConstant(v));
      n->destroy();
      changed = true;
    }
    // broadcast_tensors of inputs that all have one shape, unpacked: the inputs.
    std::vector<torch::jit::Node*> unpacks;
    each_node(graph.block(), [&](torch::jit::Node* n) {
      if (n->kind() == torch::jit::prim::ListUnpack) unpacks.push_back(n);
    });
    for (torch::jit::Node* u : unpacks) {
      torch::jit::Node* b = u->input()->node();
      if (unpack_pieces(graph, u, b, lookup)) {
        changed = true;
        continue;
      }
      if (std::string(b->kind().toQualString()) != "aten::broadcast_tensors") continue;
      torch::jit::Node* list = b->input()->node();
      if (list->kind() != torch::jit::prim::ListConstruct || list->inputs().size() != u->outputs().size()) continue;
      bool same = true;
      for (auto* v : list->inputs()) same = same && lookup(v) && lookup(list->inputs()[0]) && *lookup(v) == *lookup(list->inputs()[0]);
      if (!same) continue;
      for (size_t i = 0; i < u->outputs().size(); ++i) u->outputs()[i]->replaceAllUsesWith(list->inputs()[i]);
      u->destroy();
      changed = true;
    }
    // What functional_copies made, where the copy changed neither shape nor dtype.
    std::vector<torch::jit::Node*> same;
    each_node(graph.block(), [&](torch::jit::Node* n) {
      if (!copies.count(n) || n->inputs().size() < 2 || n->outputs().size() != 1) return;
      const std::string kind = n->kind().toQualString();
      auto a = n->inputs()[0], b = n->inputs()[1], o = n->output();
      if (kind == "aten::expand_as" && lookup(a) && lookup(b) && *lookup(a) == *lookup(b)) same.push_back(n);
      if (kind == "aten::to" && dtypes.count(a->unique()) && dtypes.count(o->unique()) &&
          dtypes.at(a->unique()) == dtypes.at(o->unique()))
        same.push_back(n);
    });
    for (torch::jit::Node* n : same) {
      n->output()->replaceAllUsesWith(n->inputs()[0]);
      n->destroy();
      changed = true;
    }
    torch::jit::ConstantPropagation(g);
    torch::jit::UnrollConstantLoops(g);
    torch::jit::ConstantPropagation(g);
    // A tuple a folded branch returned (nn.MultiheadAttention's (output, weights)),
    // now built and taken apart at the top level: its elements; a list grown in an
    // unrolled loop (34_VanillaRNNHidden's outputs.append): the lists it holds.
    torch::jit::LowerSimpleTuples(g);
    if (functional_appends(graph)) changed = true;
    torch::jit::EliminateDeadCode(g);
    if (!changed) break;
  }
}

// A traced module writes the Python numbers of its arithmetic (`x * 3`) as 0-dim
// tensor constants; the templates read scalars. Where the other operand has rank >= 1
// the scalar overload computes the same values in the same dtype (a 0-dim tensor,
// like a number, does not promote a dimensioned one), so it takes their place.
// Returns whether anything changed.
// Also clamp's bounds (Swin V2's `clamp(logit_scale, max=torch.log(torch.tensor(100.)))`),
// each a 0-dim constant or None. And the minimum or maximum of a floating tensor and a
// 0-dim constant (`torch.min(x, torch.tensor(0.5))`, level 2's 31_Conv2d_Min_Add_Multiply):
// clamp_max / clamp_min by that number, which gives the same values, NaN included (a NaN
// on either side gives NaN), in the tensor's dtype.
bool scalars_for_tensor_constants(torch::jit::Graph& graph, const shape_map& shapes, const dtype_map& dtypes) {
  static const std::set<std::string> ops = {"aten::mul", "aten::add", "aten::sub", "aten::div", "aten::rsub"};
  static const std::set<std::string> bounds = {"aten::clamp", "aten::clamp_min", "aten::clamp_max"};
  // Elementwise minimum / maximum of two tensors, by overload ("other" of min and max;
  // minimum and maximum have no other), and the clamp that bounds by a number the same way.
  static const std::map<std::pair<std::string, std::string>, std::string> extrema = {
      {{"aten::min", "other"}, "aten::clamp_max"},
      {{"aten::minimum", ""}, "aten::clamp_max"},
      {{"aten::max", "other"}, "aten::clamp_min"},
      {{"aten::maximum", ""}, "aten::clamp_min"}};
  // The number a 0-dim constant tensor holds; none for anything else.
  auto number = [](torch::jit::Value* v) -> std::optional<c10::IValue> {
    auto c = torch::jit::toIValue(v);
    if (!c || !c->isTensor() || c->toTensor().dim() != 0) return std::nullopt;
    const at::Tensor& t = c->toTensor();
    if (at::isFloatingType(t.scalar_type())) return c10::IValue(t.item<double>());
    if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) return c10::IValue(t.item<int64_t>());
    return std::nullopt;
  };
  std::vector<std::pair<torch::jit::Node*, std::string>> bounded;  // a minimum or maximum, and its clamp
  std::vector<torch::jit::Node*> todo;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    const std::string kind = n->kind().toQualString();
    if (n->inputs().size() == 2 && n->maybeSchema()) {
      auto clamp = extrema.find({kind, n->schema().overload_name()});
      auto self = shapes.find(n->inputs()[0]->unique());
      auto dtype = dtypes.find(n->inputs()[0]->unique());
      if (clamp != extrema.end() && self != shapes.end() && !self->second.empty() && dtype != dtypes.end() &&
          at::isFloatingType(dtype->second) && number(n->inputs()[1])) {
        bounded.emplace_back(n, clamp->second);
        return;
      }
    }
    if ((!ops.count(kind) && !bounds.count(kind)) || n->inputs().size() < 2 || !n->maybeSchema() ||
        n->schema().overload_name() != "Tensor")
      return;
    auto self = shapes.find(n->inputs()[0]->unique());
    if (self == shapes.end() || self->second.empty()) return;
    if (ops.count(kind)) {
      if (number(n->inputs()[1])) todo.push_back(n);
      return;
    }
    bool all = true;
    for (size_t i = 1; i < n->inputs().size(); ++i)
      all = all && (n->inputs()[i]->type()->kind() == c10::TypeKind::NoneType || number(n->inputs()[i]));
    if (all) todo.push_back(n);
  });
  for (torch::jit::Node* n : todo) {
    torch::jit::WithInsertPoint guard(n);
    std::vector<torch::jit::NamedValue> args{n->inputs()[0]};
    const size_t numbers = bounds.count(n->kind().toQualString()) ? n->inputs().size() : 2;
    for (size_t i = 1; i < n->inputs().size(); ++i) {
      auto x = i < numbers ? number(n->inputs()[i]) : std::nullopt;
      if (x) args.emplace_back(graph.insertConstant(*x));
      else args.emplace_back(n->inputs()[i]);
    }
    torch::jit::Value* out = graph.insert(n->kind(), args);
    n->output()->replaceAllUsesWith(out);
    n->destroy();
  }
  for (const auto& [n, clamp] : bounded) {
    torch::jit::WithInsertPoint guard(n);
    torch::jit::Value* bound = graph.insertConstant(*number(n->inputs()[1]));
    torch::jit::Value* out = graph.insert(c10::Symbol::fromQualString(clamp), {n->inputs()[0], bound});
    n->output()->replaceAllUsesWith(out);
    n->destroy();
  }
  return !todo.empty() || !bounded.empty();
}

// Runs a copy of `graph` whose outputs are every top-level value: the interpreter
// hands back each value's runtime form, from which shapes and constants are read.
struct probe_result {
  std::vector<torch::jit::Value*> values;  // of `graph`, in the order probed
  std::vector<c10::IValue> results;        // one per value
};

// Ops whose one output has the shape and dtype of their first input, whatever their
// other arguments, for every dtype they accept (ops that turn integers into floats, as
// sigmoid does, are not here). LibTorch's C++ lacks the meta kernels of some of them
// (relu and flip in 1.13; abs, group_norm, instance_norm, batch_norm in 2.x register
// theirs from Python), so a probe on meta tensors takes a clone of the input in their place: the
// shapes and dtypes it reports are the same, and nothing else is read from meta data.
bool keeps_input_shape(torch::jit::Node* n) {
  static const std::set<std::string> ops = {
      "aten::abs",        "aten::neg",        "aten::sign",          "aten::relu",         "aten::relu6",
      "aten::hardtanh",   "aten::threshold",  "aten::leaky_relu",    "aten::elu",          "aten::selu",
      "aten::celu",       "aten::gelu",       "aten::silu",          "aten::mish",         "aten::hardsigmoid",
      "aten::hardswish",  "aten::softplus",   "aten::softshrink",    "aten::hardshrink",   "aten::dropout",
      "aten::layer_norm", "aten::group_norm", "aten::instance_norm", "aten::batch_norm",   "aten::rms_norm",
      "aten::flip",       "aten::roll"};
  if (!ops.count(n->kind().toQualString()) || n->outputs().size() != 1 || n->inputs().empty()) return false;
  if (!n->maybeSchema() || !n->schema().overload_name().empty()) return false;
  return n->inputs()[0]->type()->cast<c10::TensorType>() && n->output()->type()->cast<c10::TensorType>();
}

// Convolutions reach aten::convolution_overrideable on the meta device, which LibTorch's
// C++ leaves unimplemented (PyTorch's meta for convolution is registered from Python),
// so a graph with a convolution could not be probed on meta: at KernelBench's level-2
// sizes it then fell to the GPU beside the worker's caches, or to the CPU with gigabytes
// of input (16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling). This kernel gives the
// output's shape from the arguments, as ATen's conv_output_size and conv_input_size
// (transposed) compute it; it is registered for Meta only where no Meta kernel exists.
std::vector<int64_t> int_list(const c10::IValue& v) {
  std::vector<int64_t> out;
  for (const c10::IValue& x : v.toListRef()) out.push_back(x.isInt() ? x.toInt() : x.toSymInt().expect_int());
  return out;
}

void convolution_meta(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const std::vector<c10::IValue> args(stack->end() - 9, stack->end());
  const at::Tensor input = args[0].toTensor(), weight = args[1].toTensor();
  const std::vector<int64_t> stride = int_list(args[3]), padding = int_list(args[4]), dilation = int_list(args[5]),
                             output_padding = int_list(args[7]);
  const bool transposed = args[6].toBool();
  const int64_t groups = args[8].isInt() ? args[8].toInt() : args[8].toSymInt().expect_int();
  const int64_t spatial = input.dim() - 2;
  TORCH_CHECK(spatial >= 1 && weight.dim() == input.dim(), "convolution (meta): input of rank ", input.dim(),
              " and weight of rank ", weight.dim());
  auto at_dim = [](const std::vector<int64_t>& v, int64_t d, int64_t fallback) {
    return v.empty() ? fallback : v[v.size() == 1 ? 0 : static_cast<size_t>(d)];
  };
  std::vector<int64_t> shape{input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t in = input.size(d + 2), k = weight.size(d + 2), s = at_dim(stride, d, 1), p = at_dim(padding, d, 0),
                  dl = at_dim(dilation, d, 1);
    const int64_t out = transposed ? (in - 1) * s - 2 * p + dl * (k - 1) + at_dim(output_padding, d, 0) + 1
                                   : (in + 2 * p - dl * (k - 1) - 1) / s + 1;
    TORCH_CHECK(out > 0, "convolution (meta): the output's spatial dimension ", d, " would be ", out);
    shape.push_back(out);
  }
  torch::jit::drop(*stack, 9);
  stack->emplace_back(at::empty(shape, input.options()));
}

void register_meta_kernels() {
  static const bool done = [] {
    auto op = c10::Dispatcher::singleton().findSchema({"aten::convolution_overrideable", ""});
    if (op && !op->hasKernelForDispatchKey(c10::DispatchKey::Meta)) {
      static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
      lib.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&convolution_meta>());
    }
    return true;
  }();
  (void)done;
}

bool on_meta(const std::vector<c10::IValue>& arguments) {
  return std::any_of(arguments.begin(), arguments.end(),
                     [](const c10::IValue& v) { return v.isTensor() && v.toTensor().is_meta(); });
}

// On meta arguments, the ops of keeps_input_shape run as a clone of their input.
result<probe_result> run_probe(const std::shared_ptr<torch::jit::Graph>& graph,
                               const std::vector<c10::IValue>& arguments) {
  std::shared_ptr<torch::jit::Graph> probe = graph->copy();
  probe_result out;
  auto g_nodes = graph->nodes();
  auto p_nodes = probe->nodes();
  auto gi = g_nodes.begin();
  for (auto pi = p_nodes.begin(); pi != p_nodes.end(); ++pi, ++gi) {
    for (size_t o = 0; o < (*pi)->outputs().size(); ++o) {
      probe->registerOutput((*pi)->outputs()[o]);
      out.values.push_back((*gi)->outputs()[o]);
    }
  }
  // Tensor constants (a traced module's plain tensor attributes: 33_VanillaRNN's hidden
  // state) go where the arguments are, so that a probe on meta or the GPU does not mix
  // them with the CPU's; on meta only their shapes are kept. 0-dim ones stay: like
  // numbers they mix with any device, and a traced size's arithmetic (NumToTensor,
  // floor_divide) runs on them on the CPU.
  std::optional<c10::Device> where;
  for (const c10::IValue& v : arguments)
    if (v.isTensor() && !where) where = v.toTensor().device();
  if (where && !where->is_cpu()) {
    std::vector<torch::jit::Node*> constants;
    each_node(probe->block(), [&](torch::jit::Node* n) {
      if (n->kind() != torch::jit::prim::Constant || !n->output()->type()->cast<c10::TensorType>()) return;
      auto c = torch::jit::toIValue(n->output());
      if (c && c->isTensor() && c->toTensor().dim() > 0 && c->toTensor().device() != *where) constants.push_back(n);
    });
    for (torch::jit::Node* n : constants) {
      torch::jit::WithInsertPoint guard(n);
      at::Tensor moved = torch::jit::toIValue(n->output())->toTensor().to(*where);
      n->output()->replaceAllUsesWith(probe->insertConstant(moved));
      n->destroy();
    }
  }
  if (on_meta(arguments)) {
    std::vector<torch::jit::Node*> stand_ins;
    each_node(probe->block(), [&](torch::jit::Node* n) {
      if (keeps_input_shape(n)) stand_ins.push_back(n);
    });
    for (torch::jit::Node* n : stand_ins) {
      torch::jit::WithInsertPoint guard(n);
      torch::jit::Value* copy = probe->insert(c10::Symbol::fromQualString("aten::clone"), {n->inputs()[0]});
      n->output()->replaceAllUsesWith(copy);
      n->destroy();
    }
  }
  size_t first_probe = graph->outputs().size();
  if (arguments.size() != graph->inputs().size())
    return error{"forward takes " + std::to_string(graph->inputs().size()) + " arguments, the task declares " +
                 std::to_string(arguments.size())};
  torch::jit::Stack stack(arguments.begin(), arguments.end());
  {
    torch::NoGradGuard no_grad;
    torch::jit::Code code(probe, "forward");
    torch::jit::InterpreterState state(code);
    state.run(stack);
  }
  if (stack.size() != first_probe + out.values.size())
    return error{"the probe returned " + std::to_string(stack.size()) + " values, expected " +
                 std::to_string(first_probe + out.values.size())};
  out.results.assign(stack.begin() + first_probe, stack.end());
  return out;
}

// The task's inputs and parameters as tensors without data, on the meta device, in
// forward's order: the shapes and dtypes the task declares (a module's parameters are
// its own, moved to meta). Nothing of the task's size is allocated.
result<std::vector<c10::IValue>> meta_arguments(const task_spec& task, const std::optional<torch::jit::Module>& module) {
  const c10::Device meta(c10::kMeta);
  std::vector<c10::IValue> out;
  auto declared = [&](const tensor_spec& t) -> result<at::Tensor> {
    auto type = scalar_type(t.dtype);
    if (!type) return error{"'" + t.name + "': unknown dtype " + t.dtype};
    return at::empty(t.shape, at::TensorOptions().dtype(*type).device(meta));
  };
  for (const auto& t : task.inputs) {
    auto x = declared(t);
    if (!x) return x.error();
    out.emplace_back(*x);
  }
  if (module) {
    auto params = module_parameters(task, *module, meta);
    if (!params) return params.error();
    out.insert(out.end(), params->begin(), params->end());
  } else {
    for (const auto& t : task.parameters) {
      auto x = declared(t);
      if (!x) return x.error();
      out.emplace_back(*x);
    }
  }
  return out;
}

// The task's inputs and parameters drawn as the reviewer draws trial 0's, on `device`.
result<std::vector<c10::IValue>> drawn_arguments(const task_spec& task, const std::optional<torch::jit::Module>& module,
                                                 const c10::Device& device) {
  // On the GPU the probe draws there too: only shapes are read from it, and a CPU draw
  // of a KernelBench-sized input takes seconds per tensor (docs/reviewer.md).
  const input_draw draw = device.is_cuda() ? input_draw::device : input_draw::cpu;
  auto inputs = make_inputs(task, trial_seed(task.seed, 0), device, draw);
  if (!inputs) return inputs.error();
  auto params = module ? module_parameters(task, *module, device) : make_parameters(task, device, draw);
  if (!params) return params.error();
  std::vector<c10::IValue> out(inputs->begin(), inputs->end());
  out.insert(out.end(), params->begin(), params->end());
  return out;
}

// The probe, as cheaply as the graph allows: the shapes, dtypes and scalars it reports
// do not depend on where it runs (scalars read from data are never trusted downstream).
//   1. on the meta device (no data: nothing of the task's size is allocated), the ops of
//      keeps_input_shape stood in for by a clone; fails for a graph that reads values
//      (item, a branch on data, nonzero), another op without a meta kernel in this
//      LibTorch, or a constant tensor of another device;
//   2. on the GPU, when this process has one, on trial 0's inputs;
//   3. on the CPU on trial 0's inputs, as the reviewer draws them. A KernelBench
//      problem's 6.4 GB input took 113 s and 12.7 GB of memory here.
// `arguments` is left holding what was probed (describe() reads only shapes and dtypes
// of tensors); `note` gets where it was probed and why each cheaper way failed.
result<probe_result> probe_cheaply(const std::shared_ptr<torch::jit::Graph>& graph, const task_spec& task,
                                   const std::optional<torch::jit::Module>& module,
                                   const std::function<void()>& reload_on_cpu,
                                   std::vector<c10::IValue>& arguments, std::string& note) {
  // The interpreter's message starts with a traceback: the line naming the error says why.
  auto first_line = [](const std::string& s) {
    size_t at = s.find("Error: ");
    at = at == std::string::npos ? 0 : s.rfind('\n', at) + 1;
    return s.substr(at, std::min(s.find('\n', at), at + 200) - at);
  };
  auto attempt = [&](const char* where, result<std::vector<c10::IValue>> args) -> std::optional<probe_result> {
    std::string why;
    if (!args) {
      why = args.message();
    } else {
      try {
        auto probed = run_probe(graph, *args);
        if (probed) {
          arguments = std::move(*args);
          note += std::string(note.empty() ? "" : "; ") + "probed on " + where;
          return std::move(*probed);
        }
        why = probed.message();
      } catch (const std::exception& e) {
        why = torch_message(e);
      }
    }
    note += std::string(note.empty() ? "" : "; ") + "not probed on " + where + ": " + first_line(why);
    // Also at once on stderr: a probe that then dies on the CPU (killed at its memory
    // limit) returns no note, and the caller shows the child's stderr from its start.
    std::fprintf(stderr, "graph export: not probed on %s: %s\n", where, first_line(why).c_str());
    return std::nullopt;
  };
  register_meta_kernels();
  if (auto p = attempt("meta", meta_arguments(task, module))) return std::move(*p);
  // The other probes draw from the weights' values: the module loaded on the meta
  // device (export_graph_json) is loaded again, on the CPU.
  if (reload_on_cpu) reload_on_cpu();
  if (torch::cuda::is_available()) {
    const c10::Device gpu(c10::kCUDA, 0);
    if (auto p = attempt("cuda", drawn_arguments(task, module, gpu))) return std::move(*p);
  }
  auto args = drawn_arguments(task, module, c10::Device(c10::kCPU));
  if (!args) return args.error();
  arguments = std::move(*args);
  note += std::string(note.empty() ? "" : "; ") + "probed on cpu";
  // As an error, not an exception: the caller puts why the cheaper probes failed first.
  try {
    return run_probe(graph, arguments);
  } catch (const std::exception& e) {
    return error{torch_message(e)};
  }
}

// The shapes of the graph's inputs and of every probed tensor whose shape cannot
// depend on values.
dtype_map known_dtypes(torch::jit::Graph& graph, const std::vector<c10::IValue>& arguments,
                       const probe_result& probed) {
  dtype_map out;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].isTensor()) out[graph.inputs()[i]->unique()] = arguments[i].toTensor().scalar_type();
  for (size_t i = 0; i < probed.values.size(); ++i)
    if (probed.results[i].isTensor()) out[probed.values[i]->unique()] = probed.results[i].toTensor().scalar_type();
  return out;
}

shape_map known_shapes(torch::jit::Graph& graph, const std::vector<c10::IValue>& arguments,
                       const probe_result& probed) {
  static const std::set<std::string> value_shaped = {
      "aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select", "aten::unique",
      "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::bincount",
      "aten::repeat_interleave", "aten::index", "aten::item", "aten::tolist"};
  shape_map out;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].isTensor()) out[graph.inputs()[i]->unique()] = arguments[i].toTensor().sizes().vec();
  // Indexing by integer tensors (Swin's relative_position_bias_table[index.view(-1)])
  // gives the shape of the indices, whatever their values; a boolean mask's result
  // depends on how many it selects.
  const dtype_map dtypes = known_dtypes(graph, arguments, probed);
  auto integer_indices = [&](torch::jit::Node* n) {
    if (std::string(n->kind().toQualString()) != "aten::index" || n->inputs().size() != 2 ||
        n->inputs()[1]->node()->kind() != torch::jit::prim::ListConstruct)
      return false;
    for (torch::jit::Value* i : n->inputs()[1]->node()->inputs()) {
      if (i->type()->kind() == c10::TypeKind::NoneType) continue;
      auto d = dtypes.find(i->unique());
      if (d == dtypes.end() || !at::isIntegralType(d->second, /*includeBool=*/false) || d->second == at::kByte)
        return false;
    }
    return true;
  };
  std::set<size_t> tainted;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    bool taint = value_shaped.count(n->kind().toQualString()) > 0 && !integer_indices(n);
    for (auto* v : n->inputs()) taint = taint || tainted.count(v->unique());
    if (taint)
      for (auto* v : n->outputs()) tainted.insert(v->unique());
  });
  for (size_t i = 0; i < probed.values.size(); ++i)
    if (probed.results[i].isTensor() && !tainted.count(probed.values[i]->unique()))
      out[probed.values[i]->unique()] = probed.results[i].toTensor().sizes().vec();
  return out;
}

// Whether the graph holds a tensor among its constants (a traced module's
// `torch.tensor(100.)`, a list attribute of tensors no parameter mirrors): their values
// come from the module, so it must be loaded with its data.
bool holds_tensor(const c10::TypePtr& t) {
  if (t->cast<c10::TensorType>() || t->kind() == c10::TypeKind::AnyType || t->kind() == c10::TypeKind::ClassType)
    return true;
  for (const c10::TypePtr& inner : t->containedTypes())
    if (holds_tensor(inner)) return true;
  return false;
}

bool has_tensor_constants(torch::jit::Graph& graph) {
  bool found = false;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    if (n->kind() == torch::jit::prim::Constant && n->outputs().size() == 1)
      found = found || holds_tensor(n->output()->type());
  });
  return found;
}

}  // namespace

result<std::string> export_graph_json(const task_spec& task, std::string* probe_note) {
  const std::string prefix = "task \"" + task.name + "\": graph export: ";
  try {
    std::shared_ptr<torch::jit::Graph> graph;
    std::optional<torch::jit::Module> module;  // a saved module
    std::function<void()> reload_on_cpu;       // set while `module` is on the meta device
    if (!task.torchscript.empty()) {
      auto unit = torch::jit::compile(task.torchscript);
      torch::jit::Function* forward = nullptr;
      for (torch::jit::Function* f : unit->get_functions())
        if (f->name() == "forward") forward = f;
      if (!forward) return error{prefix + "the TorchScript defines no function named forward"};
      graph = torch::jit::toGraphFunction(*forward).graph()->copy();
      torch::jit::Inline(*graph);
    } else {
      // A saved module: its forward's graph, once `self` is gone: the tensors it reads
      // from its attributes become the task's parameters, the rest constants.
      // Loading runs the module's __setstate__ code: checked first.
      if (auto safe = check_module_load_code(task.module_bytes); !safe) return error{prefix + safe.message()};
      auto build = [&](const c10::Device& device) -> status {
        bytes_istream bytes(task.module_bytes);  // read in place: the weights may be gigabytes
        module = torch::jit::load(bytes, device);
        module->train(task.module_training);
        graph = module->get_method("forward").graph()->copy();
        torch::jit::Inline(*graph);
        if (graph->inputs().empty()) return error{"the module's forward has no self"};
        // The operators first (they name what a hostile module reaches for), then the use
        // of `self` (a fork of one of its methods is refused either way).
        if (auto allowed = check_reference_ops(*graph); !allowed) return allowed;
        return lift_module_attributes(*graph, *module, task);
      };
      // Only the weights' shapes are read here, not their values: the module is loaded
      // onto the meta device (no data; while it loads, one tensor's bytes at a time),
      // and onto the CPU where that fails (loading compiles its code, and pooling
      // several tensor constants compares them: aten::equal has no meta kernel), where
      // its code holds tensor constants (their values are the graph's) or where a probe
      // must run off the meta device (probe_cheaply).
      bool on_meta = false;
      try {
        on_meta = build(c10::Device(c10::kMeta)).ok() && !has_tensor_constants(*graph);
      } catch (const std::exception&) {
        on_meta = false;
      }
      if (!on_meta) {
        if (auto st = build(c10::Device(c10::kCPU)); !st) return error{prefix + st.message()};
      } else {
        reload_on_cpu = [&] {
          bytes_istream bytes(task.module_bytes);
          module = torch::jit::load(bytes, c10::Device(c10::kCPU));
          module->train(task.module_training);
        };
      }
    }

    // Before anything runs it: constant propagation would already execute a file read.
    if (auto allowed = check_reference_ops(*graph); !allowed) return error{prefix + allowed.message()};
    torch::jit::ConstantPropagation(graph);
    torch::jit::EliminateDeadCode(graph);
    if (!task.module_bytes.empty()) drop_state_updates(*graph, task.inputs.size());
    // A list grown in the forward (features.append(y); torch.cat(features, 1), as
    // DenseNet's blocks do) as the lists it holds at each read; a copy_ into module
    // state as the value it gives.
    functional_appends(*graph);
    // A tuple built and taken apart in the forward (out, (h, c) = lstm(...);
    // attn_output, _ = attention(...)) as its elements.
    torch::jit::LowerSimpleTuples(graph);
    const std::set<torch::jit::Node*> copies = functional_copies(*graph);

    std::vector<c10::IValue> arguments;
    std::string note;
    auto probed = probe_cheaply(graph, task, module, reload_on_cpu, arguments, note);
    if (probe_note) *probe_note = note;
    // Why the cheaper probes failed comes first: the CPU's own message is a traceback.
    if (!probed) return error{prefix + (note.empty() ? "" : note + "; on the cpu: ") + probed.message()};
    // Shape checks and the loops behind them fold away at the task's shapes (and the
    // graph is probed again); graphs without control flow are kept as they are.
    // The shapes are read once a pass, before either fold changes the graph: probed
    // values that a fold destroys are not looked at again (ids of survivors stay the
    // same). A branch folded away lifts what it computed to the top level, unprobed
    // (nn.MultiheadAttention's projections, nn.GRU's state): while a pass changes the
    // graph, it is probed and folded again, at most four passes.
    const bool control_flow = has_control_flow(*graph) || has_computed_lists(*graph) || !copies.empty();
    if (control_flow || !task.module_bytes.empty()) {
      for (int pass = 0; pass < 4; ++pass) {
        const std::string before = graph->toString(false);
        const shape_map shapes = known_shapes(*graph, arguments, *probed);
        if (control_flow) specialise_to_shapes(graph, shapes, known_dtypes(*graph, arguments, *probed), copies);
        if (!task.module_bytes.empty())
          scalars_for_tensor_constants(*graph, shapes, known_dtypes(*graph, arguments, *probed));
        if (graph->toString(false) == before) break;
        probed = run_probe(graph, arguments);
        // Why the cheaper probes failed comes first: the CPU's own message is a traceback.
        if (!probed) return error{prefix + (note.empty() ? "" : note + "; on the cpu: ") + probed.message()};
        if (!control_flow) break;
      }
    }
    const std::vector<torch::jit::Value*>& values = probed->values;

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
    for (size_t i = 0; i < values.size(); ++i) vals[values[i]->debugName()] = describe(probed->results[i]);
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
  } catch (const std::bad_alloc&) {
    // The limit the caller set (RLIMIT_DATA) is the likely reason: say what it is, what
    // the export holds, and how to give it more.
    struct rlimit data {};
    std::string limit = "this process's memory";
    if (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY)
      limit = "its memory limit of " + std::to_string(data.rlim_cur >> 20) + " MiB";
    return error{prefix + "out of memory: the export holds the module file (" +
                 std::to_string(task.module_bytes.size() >> 20) +
                 " MiB) and, while the module loads, its largest tensor; it ran past " + limit +
                 ". Raise it: kernelskill lower --memory-mb, or references.memory_mb for run and serve"};
  } catch (const std::exception& e) {
    return error{prefix + torch_message(e)};
  }
}

}  // namespace ks
