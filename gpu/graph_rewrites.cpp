// The graph rewrites of gpu/graph_rewrites.hpp: what graph_export does to a reference's
// graph before and between its probes. A LibTorch translation unit of the worker, on
// the IR and its passes only (not the interpreter or the module loader).
#include "gpu/graph_rewrites.hpp"

#include <optional>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

namespace ks::graph_rewrites {

void each_node(torch::jit::Block* block, const std::function<void(torch::jit::Node*)>& f) {
  for (torch::jit::Node* n : block->nodes()) {
    f(n);
    for (torch::jit::Block* b : n->blocks()) each_node(b, f);
  }
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
  static const std::set<std::string> mutating = {"aten::append", "aten::insert", "aten::pop",        "aten::_set_item",
                                                 "aten::clear",  "aten::extend", "aten::remove",     "aten::reverse",
                                                 "aten::sort",   "aten::add_",   "aten::__setitem__"};
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
      torch::jit::Node* now =
          graph.insertNode(graph.createList(l->output()->type()->expect<c10::ListType>()->getElementType(), held));
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
    torch::jit::Value* typed = graph.insert(
        c10::Symbol::fromQualString("aten::to"),
        {wide, dtype, graph.insertConstant(false), graph.insertConstant(false), graph.insertConstant(c10::IValue())});
    made.insert(wide->node());
    made.insert(typed->node());
    // Every later read of dst in this block, and the copy's own result.
    std::vector<torch::jit::Use> later;
    for (const torch::jit::Use& u : dst->uses())
      if (u.user != n && u.user != wide->node() && u.user != dtype->node() &&
          u.user->owningBlock() == n->owningBlock() && n->isBefore(u.user))
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

namespace {

// The shape of a value where it is known (nullptr where not).
using shape_of = std::function<const std::vector<int64_t>*(torch::jit::Value*)>;

// A tensor cut into pieces and unpacked (q, k, v = x.split(n, dim=2); chunk; unbind)
// at a known shape: each piece as aten::slice (aten::select for unbind) of the tensor,
// ops the rules coder reads as views. Returns whether `u` was so replaced.
bool unpack_pieces(torch::jit::Graph& graph, torch::jit::Node* u, torch::jit::Node* b, const shape_of& lookup) {
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

// unchecked_cast of a value already of the type it casts to (nn.GRU's `hx` once its
// branches fold: an Optional argument that the caller passes as a tensor) is that
// value, as TorchScript's peephole pass has it; then `is None` of it folds too.
bool drop_redundant_casts(torch::jit::Graph& graph) {
  std::vector<torch::jit::Node*> casts;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    if (n->kind() == torch::jit::prim::unchecked_cast &&
        c10::unshapedType(n->input()->type())->isSubtypeOf(*c10::unshapedType(n->output()->type())))
      casts.push_back(n);
  });
  for (torch::jit::Node* n : casts) {
    n->output()->replaceAllUsesWith(n->input());
    n->destroy();
  }
  return !casts.empty();
}

// A move to the device the task runs on (`h0.to(x.device)`; a traced
// `torch.tensor(100.)`, moved to where its input is) moves nothing: a tensor of the
// task is there already, and a 0-dim constant mixes with any device. Without the
// move the probe on the CPU does not reach for the GPU, and a moved constant stays
// a constant.
bool drop_device_moves(torch::jit::Graph& graph) {
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
    auto none = [&](size_t i) {
      return i < n->inputs().size() && n->inputs()[i]->type()->kind() == c10::TypeKind::NoneType;
    };
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
  }
  return !moves.empty();
}

// What the task fixes about a tensor (its layout, device and dtype) and the
// `is None` / `is` checks whose answer its types give, as the constant they are; none
// for any other node.
std::optional<c10::IValue> known_property(torch::jit::Node* n, const dtype_map& dtypes) {
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
    if (fixed) return fixed;
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
    if ((tensor(a) && none(b)) || (none(a) && tensor(b))) return c10::IValue(qual == "aten::__isnot__");
    // `query is key` of one value (nn.MultiheadAttention's self-attention checks):
    // one object. Values that differ may still be one object: left as they are.
    if (a == b) return c10::IValue(qual == "aten::__is__");
  }
  return std::nullopt;
}

// dim, numel, size and size(d) of a tensor of known shape, as the constant they are;
// none for any other node.
std::optional<c10::IValue> known_size(torch::jit::Node* n, const shape_of& lookup) {
  const std::vector<int64_t>* known = lookup(n->inputs()[0]);
  if (!known) return std::nullopt;
  const auto& shape = *known;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const std::string kind = n->kind().toQualString();
  if (kind == "aten::dim" && n->inputs().size() == 1) return c10::IValue(static_cast<int64_t>(shape.size()));
  if (kind == "aten::numel" && n->inputs().size() == 1) return c10::IValue(numel);
  if ((kind == "aten::size" || kind == "aten::sizes") && n->inputs().size() == 1) return c10::IValue(shape);
  if (kind == "aten::size" && n->inputs().size() == 2) {
    auto d = torch::jit::toIValue(n->inputs()[1]);
    if (d && d->isInt()) {
      int64_t k = d->toInt(), r = static_cast<int64_t>(shape.size());
      if (k < 0) k += r;
      if (k >= 0 && k < r) return c10::IValue(shape[k]);
    }
  }
  return std::nullopt;
}

// Every node known_property or known_size answers, replaced by its constant.
bool fold_known_values(torch::jit::Graph& graph, const shape_of& lookup, const dtype_map& dtypes) {
  std::vector<std::pair<torch::jit::Node*, c10::IValue>> folds;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    if (n->inputs().empty()) return;
    std::optional<c10::IValue> v = known_property(n, dtypes);
    if (!v) v = known_size(n, lookup);
    if (v) folds.emplace_back(n, *v);
  });
  for (auto& [n, v] : folds) {
    torch::jit::WithInsertPoint guard(n);
    n->output()->replaceAllUsesWith(graph.insertConstant(v));
    n->destroy();
  }
  return !folds.empty();
}

// A list unpacked: pieces of a tensor (unpack_pieces) as slices of it, a list built
// only to be unpacked as its elements, and broadcast_tensors of inputs that all have
// one shape as the inputs.
bool unpack_known_lists(torch::jit::Graph& graph, const shape_of& lookup) {
  bool changed = false;
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
    // `q, k, v = f(x)` where f returns `proj[0], proj[1], proj[2]` as a List[Tensor]
    // (PyTorch 2's _in_projection_packed for nn.MultiheadAttention): once the branch
    // that built the list is folded, nothing else reads or changes the list.
    if (b->kind() == torch::jit::prim::ListConstruct && b->output()->uses().size() == 1 &&
        b->inputs().size() == u->outputs().size()) {
      for (size_t i = 0; i < u->outputs().size(); ++i) u->outputs()[i]->replaceAllUsesWith(b->inputs()[i]);
      u->destroy();
      b->destroy();
      changed = true;
      continue;
    }
    if (std::string(b->kind().toQualString()) != "aten::broadcast_tensors") continue;
    torch::jit::Node* list = b->input()->node();
    if (list->kind() != torch::jit::prim::ListConstruct || list->inputs().size() != u->outputs().size()) continue;
    bool same = true;
    for (auto* v : list->inputs())
      same = same && lookup(v) && lookup(list->inputs()[0]) && *lookup(v) == *lookup(list->inputs()[0]);
    if (!same) continue;
    for (size_t i = 0; i < u->outputs().size(); ++i) u->outputs()[i]->replaceAllUsesWith(list->inputs()[i]);
    u->destroy();
    changed = true;
  }
  return changed;
}

// What functional_copies made, where the copy changed neither shape nor dtype.
bool drop_same_copies(torch::jit::Graph& graph, const std::set<torch::jit::Node*>& copies, const shape_of& lookup,
                      const dtype_map& dtypes) {
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
  }
  return !same.empty();
}

// A traced size's arithmetic written in place on a 0-dim integer tensor (einops'
// rearrange multiplies the traced lengths of "(c l)" with mul_: level 3's
// 48_Mamba2ReturnY) as the out-of-place op, where alias analysis proves that the
// same: constant propagation then folds it, and the size it gives (aten::Int) becomes a
// constant of the list that reads it. Returns whether anything changed.
bool functional_size_arithmetic(std::shared_ptr<torch::jit::Graph>& g, const shape_of& lookup,
                                const dtype_map& dtypes) {
  return torch::jit::RemoveTensorMutation(g, [&](torch::jit::Node* n) {
    if (n->inputs().empty()) return false;
    torch::jit::Value* self = n->inputs()[0];
    const std::vector<int64_t>* shape = lookup(self);
    auto dtype = dtypes.find(self->unique());
    return shape && shape->empty() && dtype != dtypes.end() &&
           c10::isIntegralType(dtype->second, /*includeBool=*/false);
  });
}

// What the folds made constant, propagated: branches on constants folded, constant
// loops unrolled, dead code gone. A tuple a folded branch returned
// (nn.MultiheadAttention's (output, weights)), now built and taken apart at the top
// level, becomes its elements; a list grown in an unrolled loop
// (34_VanillaRNNHidden's outputs.append), the lists it holds. Returns whether the
// appends changed anything: what the passes change alone asks for no further round.
bool propagate_constants(std::shared_ptr<torch::jit::Graph>& g) {
  torch::jit::ConstantPropagation(g);
  torch::jit::UnrollConstantLoops(g);
  torch::jit::ConstantPropagation(g);
  torch::jit::LowerSimpleTuples(g);
  const bool changed = functional_appends(*g);
  torch::jit::EliminateDeadCode(g);
  return changed;
}

}  // namespace

// Besides the shapes, what a graph can ask of a tensor that the task fixes: its layout
// (strided: tasks and plans use dense tensors), its device (the GPU the kernel is
// written for: torch.norm in PyTorch 2.x branches on `input.device.type` before it picks
// linalg.vector_norm) and its dtype. Each round runs every step once, in this order;
// a round that changed nothing is the last.
void specialise_to_shapes(std::shared_ptr<torch::jit::Graph> g, const shape_map& shapes, const dtype_map& dtypes,
                          const std::set<torch::jit::Node*>& copies) {
  torch::jit::Graph& graph = *g;
  // A value a fold lifted out of a branch was not probed; an unchecked_cast (an Optional
  // tensor known to be one) has the shape of what it casts.
  const shape_of lookup = [&](torch::jit::Value* v) -> const std::vector<int64_t>* {
    while (v->node()->kind() == torch::jit::prim::unchecked_cast && !shapes.count(v->unique())) v = v->node()->input();
    auto it = shapes.find(v->unique());
    return it == shapes.end() ? nullptr : &it->second;
  };
  for (int round = 0; round < 4; ++round) {
    bool changed = drop_redundant_casts(graph);
    changed = drop_device_moves(graph) || changed;
    changed = fold_known_values(graph, lookup, dtypes) || changed;
    changed = unpack_known_lists(graph, lookup) || changed;
    changed = drop_same_copies(graph, copies, lookup, dtypes) || changed;
    changed = functional_size_arithmetic(g, lookup, dtypes) || changed;
    changed = propagate_constants(g) || changed;
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
  // A 0-dim tensor made in forward from a number (`torch.tensor(0.0, device=x.device)`,
  // level 2's 93; `torch.scalar_tensor`) as the constant it is: a 0-dim tensor mixes with
  // any device, so where the device argument points does not matter. (Without a device
  // argument, constant propagation folds it already.) TorchScript's aten::tensor is no
  // operator of the dispatcher: as a library step it could not run.
  bool made = false;
  std::vector<torch::jit::Node*> made_in_forward;
  each_node(graph.block(), [&](torch::jit::Node* n) {
    const std::string kind = n->kind().toQualString();
    if ((kind == "aten::tensor" || kind == "aten::scalar_tensor") && n->inputs().size() >= 2 &&
        n->outputs().size() == 1)
      made_in_forward.push_back(n);
  });
  for (torch::jit::Node* n : made_in_forward) {
    auto value = torch::jit::toIValue(n->inputs()[0]);
    auto dtype = torch::jit::toIValue(n->inputs()[1]);
    if (!value || !dtype || !(value->isDouble() || value->isInt() || value->isBool()) ||
        !(dtype->isNone() || dtype->isInt()))
      continue;
    // torch.tensor's dtype of a Python number: the default float type, int64 or bool.
    const at::ScalarType type = dtype->isInt()      ? static_cast<at::ScalarType>(dtype->toInt())
                                : value->isDouble() ? at::typeMetaToScalarType(at::get_default_dtype())
                                : value->isInt()    ? at::kLong
                                                    : at::kBool;
    const at::Scalar x = value->isDouble() ? at::Scalar(value->toDouble())
                         : value->isInt()  ? at::Scalar(value->toInt())
                                           : at::Scalar(value->toBool());
    torch::jit::WithInsertPoint guard(n);
    n->output()->replaceAllUsesWith(graph.insertConstant(at::scalar_tensor(x, at::TensorOptions().dtype(type))));
    n->destroy();
    made = true;
  }
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
      if (x)
        args.emplace_back(graph.insertConstant(*x));
      else
        args.emplace_back(n->inputs()[i]);
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
  return made || !todo.empty() || !bounded.empty();
}

}  // namespace ks::graph_rewrites
