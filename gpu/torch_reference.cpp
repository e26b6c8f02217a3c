// The only translation unit (with tests/reference_test.cpp) that includes LibTorch's
// script headers: they cost 12-18 s each to compile.
#include "gpu/torch_reference_tensors.hpp"

#include <chrono>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/cuda.h>
#include <torch/jit.h>
#include <torch/script.h>

#include "gpu/bytes_stream.hpp"
#include "gpu/module_load_check.hpp"
#include "gpu/reference_ops.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

namespace ks {

struct reference_program::impl {
  task_spec task;
  c10::Device device{c10::kCPU};
  // TorchScript source: the compiled unit and its forward function.
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  torch::jit::Function* forward = nullptr;
  // Or a saved module, whose forward takes the inputs only.
  std::optional<torch::jit::Module> module;
  std::vector<at::Tensor> parameters;
  input_draw draw = input_draw::cpu;
};

// The door from the tensor-level functions below into reference_program's state.
struct reference_access {
  static reference_program::impl& of(reference_program& p) { return *p.impl_; }
  static const reference_program::impl& of(const reference_program& p) { return *p.impl_; }
  static std::unique_ptr<reference_program> make(std::unique_ptr<reference_program::impl> i) {
    return std::unique_ptr<reference_program>(new reference_program(std::move(i)));
  }
};

namespace {

std::string task_prefix(const task_spec& task) { return "task \"" + task.name + "\": "; }

// The CPU generator's Mersenne Twister takes a 32-bit seed: fold the high half in so
// that seeds differing only there still give different streams.
at::Generator cpu_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed ^ (seed >> 32)); }

// Whether `draw` puts the drawing on `device` itself: a device draw on the CPU is the
// CPU scheme, one generator for all the tensors, exactly as a cpu draw.
bool draws_on_device(const c10::Device& device, input_draw draw) {
  return draw == input_draw::device && !device.is_cpu();
}

// A generator of `device` of its own (a clone of the device's default generator, which
// the reference and input programs may use), to be seeded per tensor.
at::Generator device_generator(const c10::Device& device) {
  at::Generator shared = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(shared.mutex());
  return shared.clone();
}

// The seed of the tensor at `index` of a device draw from `seed`. Every tensor gets a
// generator state of its own, so its values depend on its own spec and launch alone,
// not on how many random numbers the tensors before it took on this GPU. The constant
// keeps these seeds apart from trial_seed(task.seed, k) of the trials themselves.
uint64_t tensor_seed(uint64_t seed, size_t index) {
  return trial_seed(seed ^ 0xD1B54A32D192ED03ull, static_cast<uint32_t>(index));
}

// One tensor from its spec, drawn on `device` from `gen` (a generator of that device).
// Drawn in float32 (float64 for float64) or int64 and cast: CPU LibTorch lacks some
// distributions for float16/bfloat16/int32, and drawing in one dtype keeps the values
// independent of the torch version's per-dtype kernels.
at::Tensor make_tensor(const tensor_spec& spec, at::Generator& gen, const c10::Device& device) {
  at::ScalarType target = *scalar_type(spec.dtype);
  at::ScalarType draw = target == at::kDouble ? at::kDouble : at::isFloatingType(target) ? at::kFloat : at::kLong;
  auto opts = at::TensorOptions().dtype(draw).device(device);
  const distribution_spec& d = spec.init;
  at::IntArrayRef shape(spec.shape);
  at::Tensor t;
  if (d.kind == "normal") {
    t = at::empty(shape, opts).normal_(d.mean, d.std, gen);
  } else if (d.kind == "uniform") {
    t = at::empty(shape, opts).uniform_(d.low, d.high, gen);
  } else if (d.kind == "randint") {
    t = at::empty(shape, opts).random_(static_cast<int64_t>(d.low), static_cast<int64_t>(d.high), gen);
  } else if (d.kind == "constant") {
    t = at::full(shape, d.value, opts);
  } else if (d.kind == "zeros") {
    t = at::zeros(shape, opts);
  } else if (d.kind == "ones") {
    t = at::ones(shape, opts);
  } else if (d.kind == "arange") {
    int64_t numel = 1;
    for (int64_t s : spec.shape) numel *= s;
    t = at::arange(numel, opts).reshape(shape);
  } else if (d.kind == "kaiming_uniform") {
    // As torch.nn.Linear/Conv initialise weights: kaiming_uniform_(a=sqrt(5)) gives
    // uniform(±1/sqrt(fan_in)).
    int64_t fan_in = 1;
    for (size_t i = 1; i < spec.shape.size(); ++i) fan_in *= spec.shape[i];
    double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    t = at::empty(shape, opts).uniform_(-bound, bound, gen);
  } else {
    throw std::invalid_argument("unknown init kind \"" + d.kind + "\"");
  }
  return t.to(target);
}

// A tensor made elsewhere (a module attribute, an input program's output) must be what
// the task declares: same shape and dtype.
std::optional<std::string> mismatch(const tensor_spec& spec, const at::Tensor& t) {
  if (t.sizes().vec() != spec.shape || t.scalar_type() != *scalar_type(spec.dtype))
    return "is " + shape_to_string(t.sizes().vec()) + " " + dtype_name(t.scalar_type()) + ", the task declares " +
           shape_to_string(spec.shape) + " " + spec.dtype;
  return std::nullopt;
}

// The tensor at `path` ("bn.weight") of a module: each part but the last names a
// submodule (or any object attribute), the last a tensor.
result<at::Tensor> module_attribute(const torch::jit::Module& module, const std::string& path) {
  c10::IValue v = module._ivalue();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!v.isObject() || !v.toObjectRef().type()->hasAttribute(part))
      return error{"the module has no attribute \"" + path.substr(0, dot) + "\""};
    v = v.toObjectRef().getAttr(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!v.isTensor()) return error{"module attribute \"" + path + "\" is " + v.tagKind() + ", not a Tensor"};
  return v.toTensor();
}

// Seeds a default generator of the process (the one an op without a generator
// argument draws from). Its mutex is released before anything draws from it.
void seed_default_generator(const c10::Device& device, uint64_t seed) {
  at::Generator gen =
      device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

// Inputs made by the task's input_program: compiled, checked like a reference, then
// run as inputs(device) with the default generators seeded from the trial's seed. A
// cpu draw (or a device draw on the CPU) runs it on the CPU and copies what it made;
// a device draw runs it on the CUDA device, whose default generator is seeded with the
// trial's seed (the CPU's is seeded too, for any tensor the program makes there). The
// default generators are shared by the process: the worker draws one trial at a time,
// and nothing else in it draws from them.
result<std::vector<at::Tensor>> program_inputs(const task_spec& task, uint64_t seed, const c10::Device& device,
                                               input_draw draw) {
  const std::string where = task_prefix(task) + "input_program: ";
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  try {
    unit = torch::jit::compile(task.input_program);
  } catch (const std::exception& e) {
    return error{where + "does not compile:\n" + torch_message(e)};
  }
  torch::jit::Function* fn = nullptr;
  for (torch::jit::Function* f : unit->get_functions())
    if (f->name() == "inputs") fn = f;
  if (!fn) return error{where + "defines no function named inputs"};
  auto graph = torch::jit::toGraphFunction(*fn).graph()->copy();
  torch::jit::Inline(*graph);
  if (auto allowed = check_reference_ops(*graph); !allowed) return error{where + allowed.message()};
  c10::IValue returned;
  try {
    at::NoGradGuard no_grad;
    const bool on_device = draws_on_device(device, draw);
    seed_default_generator(c10::Device(c10::kCPU), seed ^ (seed >> 32));
    if (on_device) seed_default_generator(device, seed);
    returned = (*fn)({c10::IValue(on_device ? device : c10::Device(c10::kCPU))});
  } catch (const std::exception& e) {
    return error{where + "failed: " + torch_message(e)};
  }
  std::vector<at::Tensor> out;
  if (returned.isList())
    for (const auto& v : returned.toListRef())
      if (v.isTensor()) out.push_back(v.toTensor());
  if (!returned.isList() || out.size() != returned.toListRef().size())
    return error{where + "returned " + returned.tagKind() + "; expected a list of tensors"};
  if (out.size() != task.inputs.size())
    return error{where + "made " + std::to_string(out.size()) + " tensors, the task declares " +
                 std::to_string(task.inputs.size()) + " inputs"};
  for (size_t i = 0; i < out.size(); ++i) {
    if (auto why = mismatch(task.inputs[i], out[i]))
      return error{where + "input \"" + task.inputs[i].name + "\" " + *why};
    out[i] = out[i].contiguous().to(device);
  }
  return out;
}

// The tensors of `specs` on `device`. A CPU draw takes them one after the other from
// one CPU generator seeded with `seed`, then copies them; a device draw seeds a
// generator of the device for each tensor (tensor_seed) and draws it in place.
result<std::vector<at::Tensor>> make_tensors(const task_spec& task, const std::vector<tensor_spec>& specs,
                                             const char* what, uint64_t seed, const c10::Device& device,
                                             input_draw draw) {
  std::vector<at::Tensor> out;
  out.reserve(specs.size());
  const bool on_device = draws_on_device(device, draw);
  std::optional<at::Generator> gen;
  for (size_t i = 0; i < specs.size(); ++i) {
    const tensor_spec& spec = specs[i];
    if (!scalar_type(spec.dtype))
      return error{task_prefix(task) + what + " \"" + spec.name + "\": unknown dtype \"" + spec.dtype + "\""};
    try {
      if (!gen) gen = on_device ? device_generator(device) : cpu_generator(seed);
      if (on_device) gen->set_current_seed(tensor_seed(seed, i));
      out.push_back(make_tensor(spec, *gen, on_device ? device : c10::Device(c10::kCPU)).to(device));
    } catch (const std::exception& e) {
      return error{task_prefix(task) + "cannot make " + what + " \"" + spec.name + "\" (" + spec.init.kind + " " +
                   spec.dtype + "): " + torch_message(e)};
    }
  }
  return out;
}

result<c10::Device> parse_device(const std::string& name) {
  static const std::regex re("cpu|cuda(:[0-9]+)?");
  if (!std::regex_match(name, re)) return error{"device \"" + name + "\": expected cpu, cuda or cuda:N"};
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (!torch::cuda::is_available())
    return error{"device \"" + name + "\": LibTorch sees no CUDA device (built without CUDA, no driver, or no GPU)"};
  int index = name == "cuda" ? 0 : std::stoi(name.substr(5));
  int count = static_cast<int>(torch::cuda::device_count());
  if (index >= count)
    return error{"device \"" + name + "\": only " + std::to_string(count) + " CUDA device(s) visible"};
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::string tensor_list(const task_spec& task) {
  std::string out;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// LibTorch's message without the C++ backtrace that c10::Error appends.
std::string torch_message(const std::exception& e) {
  if (auto* c10e = dynamic_cast<const c10::Error*>(&e)) return c10e->what_without_backtrace();
  return e.what();
}

std::optional<at::ScalarType> scalar_type(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "float16") return at::kHalf;
  if (dtype == "bfloat16") return at::kBFloat16;
  if (dtype == "float64") return at::kDouble;
  if (dtype == "int32") return at::kInt;
  if (dtype == "int64") return at::kLong;
  if (dtype == "bool") return at::kBool;
  return std::nullopt;
}

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kDouble:
      return "float64";
    case at::kInt:
      return "int32";
    case at::kLong:
      return "int64";
    case at::kBool:
      return "bool";
    default:
      return c10::toString(t);
  }
}

reference_program::reference_program(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
reference_program::~reference_program() = default;

const task_spec& reference_program::task() const { return impl_->task; }
std::string reference_program::device() const { return impl_->device.str(); }
input_draw reference_program::draw() const { return impl_->draw; }

const char* to_string(input_draw d) { return d == input_draw::cpu ? "cpu" : "device"; }

result<input_draw> parse_input_draw(const std::string& name) {
  if (name == "device") return input_draw::device;
  if (name == "cpu") return input_draw::cpu;
  return error{"\"" + name +
               "\": expected device (draw on the device the reference runs on) or cpu (draw on "
               "the CPU and copy: the same values on every machine)"};
}

namespace {

// A reference's code: TorchScript's compiled unit and its forward, or a saved module.
struct reference_code {
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  torch::jit::Function* forward = nullptr;
  std::optional<torch::jit::Module> module;
};

// Compiles (TorchScript) or loads (a saved module, its load-time code checked first)
// the task's reference into `code`, and checks its operators (gpu/reference_ops.hpp);
// nothing of the reference runs.
status load_code(const task_spec& task, const c10::Device& device, reference_code& code) {
  const size_t declared = task.inputs.size() + task.parameters.size();
  if (!task.torchscript.empty()) {
    try {
      code.unit = torch::jit::compile(task.torchscript);
    } catch (const std::exception& e) {
      return error{task_prefix(task) + "the TorchScript does not compile:\n" + torch_message(e)};
    }
    for (torch::jit::Function* f : code.unit->get_functions())
      if (f->name() == "forward") code.forward = f;
    if (!code.forward) return error{task_prefix(task) + "the TorchScript defines no function named forward"};
    auto graph = torch::jit::toGraphFunction(*code.forward).graph()->copy();
    torch::jit::Inline(*graph);
    if (auto allowed = check_reference_ops(*graph); !allowed) return error{task_prefix(task) + allowed.message()};
    size_t takes = code.forward->getSchema().arguments().size();
    if (takes != declared)
      return error{task_prefix(task) + "forward takes " + std::to_string(takes) + " arguments, but the task declares " +
                   std::to_string(declared) + " tensors (" + tensor_list(task) + "), passed as inputs then parameters"};
  } else {
    bytes_istream bytes(task.module_bytes);  // not a copy: weights may be gigabytes
    std::string where = task.module_path.empty() ? "the module" : "module \"" + task.module_path + "\"";
    // Loading runs the module's __setstate__ code: checked first (gpu/module_load_check.hpp).
    if (auto safe = check_module_load_code(task.module_bytes); !safe)
      return error{task_prefix(task) + where + ": " + safe.message()};
    try {
      code.module = torch::jit::load(bytes, device);
      // Eval mode unless the task says training (an imported KernelBench problem runs
      // as KernelBench runs it: in training mode, BatchNorm on batch statistics).
      code.module->train(task.module_training);
    } catch (const std::exception& e) {
      return error{task_prefix(task) + "cannot load " + where + ": " + torch_message(e)};
    }
    auto forward = code.module->find_method("forward");
    if (!forward) return error{task_prefix(task) + where + " has no forward method"};
    auto graph = forward->graph()->copy();
    torch::jit::Inline(*graph);
    if (auto allowed = check_reference_ops(*graph); !allowed) return error{task_prefix(task) + allowed.message()};
    size_t takes = forward->function().getSchema().arguments().size() - 1;  // self
    if (takes != task.inputs.size())
      return error{task_prefix(task) + where + ": forward takes " + std::to_string(takes) +
                   " inputs, but the task declares " + std::to_string(task.inputs.size()) + " (" + tensor_list(task) +
                   ")"};
  }

  return {};
}

}  // namespace

status check_reference_code(const task_spec& task) {
  if (auto st = validate_task(task); !st) return error{st.message()};
  reference_code code;
  return load_code(task, c10::Device(c10::kCPU), code);
}

result<std::unique_ptr<reference_program>> reference_program::load(const task_spec& task,
                                                                   const reference_options& options) {
  if (auto st = validate_task(task); !st) return error{st.message()};
  auto device = parse_device(options.device);
  if (!device) return error{task_prefix(task) + device.message()};

  at::set_num_threads(options.threads > 0 ? options.threads
                                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  torch::jit::setGraphExecutorOptimize(options.jit_optimize);

  auto p = std::make_unique<impl>();
  p->task = task;
  p->device = *device;
  p->draw = options.draw;
  reference_code code;
  if (auto st = load_code(task, *device, code); !st) return error{st.message()};
  p->unit = std::move(code.unit);
  p->forward = code.forward;
  p->module = std::move(code.module);

  auto params = p->module ? module_parameters(task, *p->module, *device) : make_parameters(task, *device, p->draw);
  if (!params) return params.error();
  p->parameters = std::move(params.value());
  return reference_access::make(std::move(p));
}

result<reference_outputs> reference_program::run(uint64_t seed) {
  reference_outputs out;
  out.trial_seed = seed;
  auto t0 = std::chrono::steady_clock::now();
  auto inputs = make_inputs(impl_->task, seed, impl_->device, impl_->draw);
  if (!inputs) return inputs.error();
  synchronize(impl_->device);
  out.inputs_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  auto outputs = run_tensors(*this, *inputs);
  if (!outputs) return outputs.error();
  try {
    synchronize(impl_->device);
    out.forward_ms = ms_since(t1);
    for (const auto& t : *outputs) out.outputs.push_back(summarize(t));
  } catch (const std::exception& e) {
    return error{task_prefix(impl_->task) + "forward failed: " + torch_message(e)};
  }
  return out;
}

uint64_t trial_seed(uint64_t task_seed, uint32_t trial) {
  // splitmix64: the golden-ratio step is odd, so distinct trials give distinct
  // states, and the finaliser is a bijection.
  uint64_t z = task_seed + (static_cast<uint64_t>(trial) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

result<std::vector<at::Tensor>> make_inputs(const task_spec& task, uint64_t trial_seed, const c10::Device& device,
                                            input_draw draw) {
  if (!task.input_program.empty()) return program_inputs(task, trial_seed, device, draw);
  return make_tensors(task, task.inputs, "input", trial_seed, device, draw);
}

// Parameters of kind module: copies of the module's attributes on `device`. Copies,
// so that a reference which updates its own state (BatchNorm's running statistics in
// training mode) never changes what the candidates are given.
result<std::vector<at::Tensor>> module_parameters(const task_spec& task, const torch::jit::Module& module,
                                                  const c10::Device& device) {
  std::vector<at::Tensor> out;
  for (const auto& spec : task.parameters) {
    auto t = module_attribute(module, spec.init.attr);
    if (!t) return error{task_prefix(task) + "parameter \"" + spec.name + "\": " + t.message()};
    if (auto why = mismatch(spec, *t))
      return error{task_prefix(task) + "parameter \"" + spec.name + "\" (module attribute " + spec.init.attr + ") " +
                   *why};
    out.push_back(t->detach().to(device).clone());
  }
  return out;
}

result<std::vector<at::Tensor>> make_parameters(const task_spec& task, const c10::Device& device, input_draw draw) {
  if (!task.module_bytes.empty() && !task.parameters.empty()) {
    if (auto safe = check_module_load_code(task.module_bytes); !safe)
      return error{task_prefix(task) + "the module: " + safe.message()};
    try {
      bytes_istream bytes(task.module_bytes);  // not a copy: weights may be gigabytes
      return module_parameters(task, torch::jit::load(bytes, device), device);
    } catch (const std::exception& e) {
      return error{task_prefix(task) + "cannot load the module: " + torch_message(e)};
    }
  }
  return make_tensors(task, task.parameters, "parameter", task.seed, device, draw);
}

result<std::vector<at::Tensor>> run_tensors(reference_program& program, const std::vector<at::Tensor>& inputs) {
  auto& p = reference_access::of(program);
  if (inputs.size() != p.task.inputs.size())
    return error{task_prefix(p.task) + "expected " + std::to_string(p.task.inputs.size()) + " inputs, got " +
                 std::to_string(inputs.size())};
  at::NoGradGuard no_grad;
  c10::IValue returned;
  try {
    std::vector<c10::IValue> stack(inputs.begin(), inputs.end());
    if (p.module) {
      returned = p.module->forward(std::move(stack));
    } else {
      stack.insert(stack.end(), p.parameters.begin(), p.parameters.end());
      returned = (*p.forward)(std::move(stack));
    }
  } catch (const std::exception& e) {
    return error{task_prefix(p.task) + "forward failed: " + torch_message(e)};
  }

  std::vector<at::Tensor> outputs;
  auto take = [&](const c10::IValue& v) {
    if (!v.isTensor()) return false;
    outputs.push_back(v.toTensor());
    return true;
  };
  bool ok = true;
  if (returned.isTensor()) {
    ok = take(returned);
  } else if (returned.isTuple()) {
    for (const auto& v : returned.toTupleRef().elements()) ok = ok && take(v);
  } else if (returned.isList()) {
    for (const auto& v : returned.toListRef()) ok = ok && take(v);
  } else {
    ok = false;
  }
  if (!ok || outputs.empty())
    return error{task_prefix(p.task) + "forward returned " + returned.tagKind() +
                 "; expected a Tensor or a tuple/list of Tensors"};
  return outputs;
}

const std::vector<at::Tensor>& parameter_tensors(const reference_program& program) {
  return reference_access::of(program).parameters;
}

c10::Device program_device(const reference_program& program) { return reference_access::of(program).device; }

tensor_summary summarize(const at::Tensor& tensor) {
  tensor_summary s;
  s.shape = tensor.sizes().vec();
  s.dtype = dtype_name(tensor.scalar_type());
  s.numel = tensor.numel();
  if (s.numel == 0) return s;
  at::Tensor x = tensor.detach().to(at::kDouble);
  at::Tensor finite_mask = at::isfinite(x);
  s.nan_count = at::isnan(x).sum().item<int64_t>();
  s.inf_count = s.numel - s.nan_count - finite_mask.sum().item<int64_t>();
  at::Tensor finite = (s.nan_count + s.inf_count) ? x.masked_select(finite_mask) : x;
  if (finite.numel() == 0) return s;
  s.sum = finite.sum().item<double>();
  s.mean = s.sum / static_cast<double>(finite.numel());
  s.min = finite.min().item<double>();
  s.max = finite.max().item<double>();
  s.abs_max = finite.abs().max().item<double>();
  return s;
}

}  // namespace ks
