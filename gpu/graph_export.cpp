// The second LibTorch script-header translation unit of the worker (with
// torch_reference.cpp): the graph's export, its probes and the interpreter. What is
// done to the graph itself is in graph_rewrites.cpp.
#include "gpu/graph_export.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <sys/resource.h>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/cuda.h>
#include <torch/jit.h>
#include <torch/library.h>
#include <torch/script.h>
#include <nlohmann/json.hpp>

#include "gpu/bytes_stream.hpp"
#include "gpu/graph_rewrites.hpp"
#include "gpu/module_load_check.hpp"
#include "gpu/reference_ops.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "model/json_codec.hpp"

namespace ks {

namespace {

using namespace graph_rewrites;

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

// A saved module's inlined forward, `self` taken out: each tensor attribute it reads
// becomes the graph input of the task parameter that mirrors it ({kind: module, attr}),
// appended in the task's order; other attributes (ints, floats, flags such as
// `training`) become constants. Fails naming a tensor attribute the task does not
// declare.
status lift_module_attributes(torch::jit::Graph& graph, const torch::jit::Module& module, const task_spec& task) {
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
    while (!p.init.attr.empty() && std::getline(path, part, '.') && at.isObject() &&
           at.toObjectRef().type()->hasAttribute(part))
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
        return !t.is_meta() && m.data_ptr() == t.data_ptr() && m.sizes() == t.sizes() && m.strides() == t.strides() &&
               m.scalar_type() == t.scalar_type();
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
      "aten::abs",        "aten::neg",        "aten::sign",          "aten::relu",       "aten::relu6",
      "aten::hardtanh",   "aten::threshold",  "aten::leaky_relu",    "aten::elu",        "aten::selu",
      "aten::celu",       "aten::gelu",       "aten::silu",          "aten::mish",       "aten::hardsigmoid",
      "aten::hardswish",  "aten::softplus",   "aten::softshrink",    "aten::hardshrink", "aten::dropout",
      "aten::layer_norm", "aten::group_norm", "aten::instance_norm", "aten::batch_norm", "aten::rms_norm",
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
result<std::vector<c10::IValue>> meta_arguments(const task_spec& task,
                                                const std::optional<torch::jit::Module>& module) {
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
                                   const std::function<void()>& reload_on_cpu, std::vector<c10::IValue>& arguments,
                                   std::string& note) {
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
  static const std::set<std::string> value_shaped = {"aten::nonzero",
                                                     "aten::nonzero_numpy",
                                                     "aten::argwhere",
                                                     "aten::masked_select",
                                                     "aten::unique",
                                                     "aten::_unique",
                                                     "aten::_unique2",
                                                     "aten::unique_dim",
                                                     "aten::unique_consecutive",
                                                     "aten::bincount",
                                                     "aten::repeat_interleave",
                                                     "aten::index",
                                                     "aten::item",
                                                     "aten::tolist"};
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
