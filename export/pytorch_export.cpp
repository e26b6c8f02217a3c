#include "export/pytorch_export.hpp"

#include <cstdlib>
#include <set>
#include <sstream>

#include "base/content_hash.hpp"
#include "export/embedded_runtime.hpp"
#include "export/general_launcher.hpp"
#include "export/kernelbench_module.hpp"
#include "export/size_launcher.hpp"
#include "export/source_text.hpp"
#include "plan/kernel_signatures.hpp"
#include "plan/launch_bound.hpp"

namespace ks {

namespace {

using export_detail::aten_dtype;
using export_detail::cpp_string;
using export_detail::ident;
using export_detail::number;
using export_detail::py_block_string;
using export_detail::py_string;
using export_detail::shape_list;
using export_detail::size_function;
using export_detail::size_variant;

// ---------------------------------------------------------------------------
// Compile options: NVRTC's (the reviewer's) as nvcc options.

result<std::vector<std::string>> nvcc_options(const std::vector<std::string>& opts) {
  std::vector<std::string> out;
  for (const auto& o : opts) {
    auto starts = [&](const char* p) { return o.rfind(p, 0) == 0; };
    if (starts("-std=") || starts("--std=")) continue;  // PyTorch sets the language standard
    if (starts("-D") || o == "--use_fast_math" || o == "-use_fast_math" || starts("-maxrregcount") ||
        starts("--maxrregcount") || starts("-ftz") || starts("--ftz") || starts("-prec-div") || starts("--prec-div") ||
        starts("-prec-sqrt") || starts("--prec-sqrt") || starts("-fmad") || starts("--fmad") ||
        o == "--extra-device-vectorization" || o == "-extra-device-vectorization") {
      out.push_back(o);
      continue;
    }
    return error{"compile option '" + o + "' has no nvcc equivalent known to the exporter"};
  }
  return out;
}

// The plan resolved at the default shapes and at every named size (a size with the
// shapes of an earlier one is left out; one the plan does not resolve at is listed in
// ex.skipped_sizes). Fails where the plan does not resolve at the default shapes.
result<std::vector<size_variant>> resolve_sizes(const task_spec& task, const candidate& best,
                                                const pytorch_export_options& options, const std::string& what,
                                                pytorch_export& ex) {
  std::vector<size_variant> variants;
  std::vector<std::string> names = {""};
  for (auto& [n, _] : task.sizes) names.push_back(n);
  for (const auto& n : names) {
    auto ctx = make_plan_context(task, best.source, n);
    if (!ctx) return error{what + ": " + ctx.message()};
    ctx->limits = options.limits;
    auto r = resolve_plan(best.plan, *ctx);
    const std::string label = n.empty() ? "default" : n;
    if (!r) {
      if (n.empty()) return error{what + ": the launch plan does not resolve at the task's shapes: " + r.message()};
      ex.skipped_sizes.push_back(label + ": " + r.message());
      continue;
    }
    size_variant v{label, {}, std::move(*r)};
    for (const auto* list : {&task.inputs, &task.parameters})
      for (const auto& t : *list) v.shapes.push_back(ctx->inputs.at(t.name).shape);
    bool duplicate = false;
    for (auto& other : variants) duplicate = duplicate || other.shapes == v.shapes;
    if (duplicate) continue;
    variants.push_back(std::move(v));
  }
  for (const auto& v : variants) ex.sizes.push_back(v.name);
  return variants;
}

// ks_forward: the tensors checked and made contiguous, then the launcher of their
// shapes, else the general one (or, without it, an error that lists the shapes).
std::string forward_function(const task_spec& task, const std::vector<size_variant>& variants, bool general) {
  const size_t n_tensors = task.inputs.size() + task.parameters.size();
  std::ostringstream l;
  // Names and dtypes, for messages.
  std::vector<std::string> tensor_names;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) tensor_names.push_back(t.name);
  std::string supported;
  for (const auto& v : variants) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < v.shapes.size(); ++i) parts.push_back(tensor_names[i] + " " + shape_list(v.shapes[i]));
    supported += (supported.empty() ? "" : "; ") + v.name + ": " + join(parts, ", ");
  }
  const std::string who = "ModelNew (task " + task.name + ")";
  l << "// The task's inputs, then its parameters, in the reference's order.\n"
    << "// general: skip the size-specialised launchers (to check the general one).\n"
    << "std::vector<at::Tensor> ks_forward(const std::vector<at::Tensor>& tensors, bool general) {\n"
    << "  TORCH_CHECK(tensors.size() == " << n_tensors << ", "
    << cpp_string(who + ": expected " + std::to_string(n_tensors) + " tensors (" + join(tensor_names, ", ") + "), got ")
    << ", tensors.size());\n"
    << "  std::vector<at::Tensor> in;\n";
  size_t k = 0;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) {
      std::string i = std::to_string(k++);
      l << "  TORCH_CHECK(tensors[" << i << "].is_cuda(), "
        << cpp_string(who + ": " + t.name + " must be a CUDA tensor") << ");\n"
        << "  TORCH_CHECK(tensors[" << i << "].scalar_type() == " << aten_dtype(t.dtype) << ", "
        << cpp_string(who + ": " + t.name + " must be " + t.dtype + ", got ") << ", tensors[" << i
        << "].scalar_type());\n"
        << (k == 1 ? std::string()
                   : "  TORCH_CHECK(tensors[" + i + "].device() == tensors[0].device(), " +
                         cpp_string(who + ": " + t.name + " is on another device than " + tensor_names[0]) + ");\n")
        << "  in.push_back(tensors[" << i << "].contiguous());\n";
    }
  l << "  const c10::cuda::CUDAGuard guard(in[0].device());\n";
  for (const auto& v : variants) {
    std::string list = "std::vector<std::vector<int64_t>>{";
    for (size_t i = 0; i < v.shapes.size(); ++i)
      list += (i ? ", " : "") + std::string("std::vector<int64_t>") + shape_list(v.shapes[i], "{", "}");
    list += "}";
    l << "  if (!general && ks_shapes_are(in, " << list << ")) return ks_run_" << ident(v.name) << "(in);\n";
  }
  if (general) {
    l << "  return ks_run_general(in);\n}\n";
  } else {
    l << "  std::string got;\n"
      << "  for (size_t i = 0; i < in.size(); ++i) {\n"
      << "    got += i ? \", \" : \"\";\n"
      << "    got += std::to_string(in[i].dim()) + \"-d [\";\n"
      << "    for (int64_t d = 0; d < in[i].dim(); ++d) got += (d ? \", \" : \"\") + std::to_string(in[i].size(d));\n"
      << "    got += \"]\";\n  }\n"
      << "  TORCH_CHECK(false, "
      << cpp_string(who + ": the launch plan was resolved at export time for these shapes only: " + supported +
                    "; got ")
      << ", got, \". Add the size to the task's sizes: and export again.\");\n"
      << "  return {};\n}\n";
  }
  return l.str();
}

// KS_LAUNCH where the launcher is in CPP_SOURCE (host_launcher_in_cpp): the kernel named
// by its host stub (declared from the source's parameter list, defined by nvcc in the
// CUDA_SOURCE object), each argument converted to its parameter's type as a call would
// convert it, then cudaLaunchKernel with their addresses: what the stub of a <<<>>> launch
// does (it too leaves errors to the next cudaGetLastError: C10_CUDA_KERNEL_LAUNCH_CHECK).
// And cudaFuncSetAttribute of a kernel, as nvcc's cuda_runtime.h has it.
const char* const kHostLaunch = R"KS(template <class T>
struct ks_param_of {
  using type = T;
};
template <class T>
T ks_as_param(typename ks_param_of<T>::type v) {
  return v;
}
template <class... P, size_t... I>
void ks_launch_args(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    std::tuple<P...>& args, std::index_sequence<I...>) {
  void* ptrs[] = {static_cast<void*>(&std::get<I>(args))..., nullptr};
  (void)cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, ptrs, smem, stream);
}
template <class... P, class... A>
void ks_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... a) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launch with the wrong number of arguments");
  std::tuple<P...> args(ks_as_param<P>(std::forward<A>(a))...);
  ks_launch_args(kernel, grid, block, smem, stream, args, std::index_sequence_for<P...>());
}
#define KS_LAUNCH(kernel, grid, block, smem, stream, ...) ks_launch(kernel, grid, block, smem, stream, __VA_ARGS__)
// cuda_runtime.h's overload for a kernel (not a const void*) is nvcc's only.
template <class... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
)KS";

// Whether the launcher can be compiled by the host compiler in CPP_SOURCE: every kernel
// it launches takes parameters of types the host knows there (scalars, CUDA's vector,
// half and bfloat16 types, pointers to them). Else it stays in CUDA_SOURCE, after the
// kernels.
bool host_launcher_in_cpp(const std::set<std::string>& launched, const std::vector<kernel_signature>& kernels) {
  for (const auto& name : launched) {
    const kernel_signature* k = find_kernel(kernels, name);
    if (!k) return false;
    for (const auto& p : k->params)
      if (p.kind == scalar_kind::other) return false;
  }
  return true;
}

// The launcher: the runtime helpers the plan needs, the size-specialised launchers,
// the general one where it can be written (else ex.general_launcher_note says why),
// then ks_forward.
result<std::string> launcher(const task_spec& task, const candidate& best, const std::vector<size_variant>& variants,
                             const std::vector<kernel_signature>& kernels, bool host_split, const std::string& what,
                             pytorch_export& ex) {
  std::ostringstream l;
  l << "// ---------------------------------------------------------------------------\n"
    << "// The launcher, generated by kernelskill export from the launch plan.\n"
    << "#ifndef KS_LAUNCH\n"
    << (host_split ? kHostLaunch
                   : "#define KS_LAUNCH(kernel, grid, block, smem, stream, ...) "
                     "kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)\n")
    << "#endif\n\n";
  bool has_dispatcher_step = false;
  for (const auto& st : best.plan.steps) has_dispatcher_step = has_dispatcher_step || st.attrs.count("schema");
  bool has_library_step = false;
  for (const auto& st : best.plan.steps) has_library_step = has_library_step || st.kind != "kernel";
  if (has_library_step)
    l << "// Library steps' results: taken as their declared buffers where nothing else sees them.\n"
      << export_detail::library_results_runtime() << "\n";
  bool has_tf32_step = false;
  for (const auto& st : best.plan.steps)
    has_tf32_step = has_tf32_step || (st.attrs.count("math") && st.attrs.at("math") == "tf32");
  if (has_tf32_step)
    l << "// Split-precision products: cuBLAS allowed TF32 for their call only.\n"
      << export_detail::matmul_precision_runtime() << "\n";
  if (has_dispatcher_step)
    l << "// Dispatcher steps: ATen ops called by their schema, as the reviewer calls them.\n"
      << export_detail::dispatch_runtime() << "\n";
  auto general = export_detail::general_function(task, best.plan, kernels);
  if (general)
    l << "// The expression language at run time (plan/shape_expr.cpp's rules).\n"
      << export_detail::expression_runtime() << "\n";
  else
    ex.general_launcher_note = general.message();
  l << "namespace {\n\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    auto fn = size_function(task, variants[i], kernels, "ks_run_" + ident(variants[i].name));
    if (!fn) return error{what + ", size " + variants[i].name + ": " + fn.message()};
    l << *fn << "\n";
  }
  if (general) l << *general << "\n";
  l << "bool ks_shapes_are(const std::vector<at::Tensor>& in, const std::vector<std::vector<int64_t>>& shapes) {\n"
    << "  for (size_t i = 0; i < in.size(); ++i)\n"
    << "    if (in[i].sizes() != at::IntArrayRef(shapes[i])) return false;\n"
    << "  return true;\n}\n\n"
    << "}  // namespace\n\n";
  l << forward_function(task, variants, bool(general));
  return l.str();
}

const char* const kLauncherIncludes =
    "#include <ATen/cuda/CUDAContext.h>\n"
    "#include <c10/cuda/CUDAGuard.h>\n"
    "#include <c10/cuda/CUDAException.h>\n"
    "#include <ATen/core/dispatch/Dispatcher.h>\n"
    "#include <ATen/core/stack.h>\n";
const char* const kStandardIncludes =
    "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n#include <map>\n"
    "#include <optional>\n#include <stdexcept>\n#include <string>\n#include <vector>\n";

// What nvcc compiles (load_extension): headers, the candidate's device code, then the
// launcher unless it is in CPP_SOURCE (`launcher` empty).
std::string cuda_source(const task_spec& task, const candidate& best, const std::string& launcher) {
  return "// CUDA source of KernelSkill task '" + task.name + "', candidate " +
         (best.id.empty() ? std::string("(no id)") : best.id) + ".\n" +
         "// load_extension puts cuda.h and cuda_runtime.h before this (and torch/types.h where\n"
         "// the launcher is here).\n" +
         (launcher.empty() ? std::string("// The launcher is in CPP_SOURCE (the host compiler's).\n")
                           : std::string(kLauncherIncludes)) +
         kStandardIncludes +
         "\n"
         "// ---------------------------------------------------------------------------\n"
         "// The candidate's device code, as reviewed.\n" +
         best.source + (best.source.empty() || best.source.back() == '\n' ? "" : "\n") +
         (launcher.empty() ? "" : "\n" + launcher);
}

// What the host compiler compiles where the launcher is there: headers,
// the kernels' host declarations, the launcher (which defines ks_forward).
std::string cpp_source(const task_spec& task, const candidate& best, const std::vector<kernel_signature>& kernels,
                       const std::set<std::string>& launched, const pytorch_export& ex) {
  bool half = false, bfloat16 = false;
  for (const auto& name : launched)
    for (const auto& p : find_kernel(kernels, name)->params) {
      half = half || p.kind == scalar_kind::float16;
      bfloat16 = bfloat16 || p.kind == scalar_kind::bfloat16;
    }
  return "// Host launcher of KernelSkill task '" + task.name + "', candidate " +
         (best.id.empty() ? std::string("(no id)") : best.id) + ".\n" +
         "// load_extension puts torch/extension.h before this and compiles it with the host\n"
         "// compiler; the kernels are compiled by nvcc from CUDA_SOURCE.\n" +
         kLauncherIncludes + "#include <cuda_runtime.h>\n" + (half ? "#include <cuda_fp16.h>\n" : "") +
         (bfloat16 ? "#include <cuda_bf16.h>\n" : "") + kStandardIncludes +
         "#include <tuple>\n#include <utility>\n\n"
         "// The kernels, defined in CUDA_SOURCE: their host stubs, which a launch names.\n" +
         ex.kernel_declarations + "\n" + ex.launcher;
}

std::string py_distribution(const distribution_spec& d) {
  // A module's attribute (a saved module's weight) names its path in the module.
  const std::string attr = d.kind == "module" ? ", \"attr\": " + py_string(d.attr) : "";
  return "{\"kind\": " + py_string(d.kind) + ", \"mean\": " + number(d.mean) + ", \"std\": " + number(d.std) +
         ", \"low\": " + number(d.low) + ", \"high\": " + number(d.high) + ", \"value\": " + number(d.value) + attr +
         "}";
}

// The host compiler's optimisation of CPP_SOURCE, the launcher (PyTorch's default):
// its functions are as long as the plan (a step is a few lines), and g++ optimising them
// grows faster than their length (DenseNet121's: 39 s at -O0, 237 s at -O1; docs/export.md,
// "How the extension is built"). The launcher's work is calls into ATen and the CUDA
// runtime; the kernels are nvcc's, at -O3.
const char* const kHostOptimisation = "-O0";

// The Python file's fixed part, after its constants: the dtypes by name, the
// extension's loading (kExtensionCode, which a KernelBench-interface file shares), then
// the inputs' drawing, class ModelNew, get_inputs() and get_init_inputs().
const char* const kDtypesCode =
    R"PY(_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float64": torch.float64, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
)PY";

const char* const kExtensionCode = R"PY(_extension = None
# What the host compiler builds after CPP_SOURCE: the binding of ks_forward (as
# load_inline would write it).
_BINDING = """
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("ks_forward", torch::wrap_pybind_function(ks_forward), "ks_forward");
}
"""


def _write_source(path, text):
    """Writes a source file of the build where its text changed: ninja rebuilds what is
    newer than its output, so an unchanged file keeps its time."""
    try:
        with open(path) as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)
    return path


def load_extension(build_directory=None, verbose=False):
    """Builds (first call) and returns the extension: ks_forward(list of tensors).

    nvcc compiles CUDA_SOURCE, the kernels, with no PyTorch header before them (they use
    none; with load_inline's torch/types.h before a level-2 model's kernels, nvcc took
    25.2 s on a 2-core machine, 1.5 s without), and the host compiler the launcher in
    CPP_SOURCE after torch/extension.h; then one link (torch.utils.cpp_extension.load, into build_directory or PyTorch's
    default directory for MODULE_NAME)."""
    global _extension
    if _extension is None:
        from torch.utils.cpp_extension import _get_build_directory, load
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}{'a' if major >= 9 else ''}"  # as the reviewer compiles: sm_90a on H100/H200
        directory = build_directory or _get_build_directory(MODULE_NAME, verbose)
        os.makedirs(directory, exist_ok=True)
        # A launcher that stayed with the kernels (CPP_SOURCE only declares ks_forward)
        # uses ATen in CUDA_SOURCE: that file then gets PyTorch's header.
        cuda = (("#include <torch/types.h>\n" if LAUNCHER_IN_CUDA else "") + "#include <cuda.h>\n"
                "#include <cuda_runtime.h>\n" + CUDA_SOURCE)
        sources = [_write_source(os.path.join(directory, "main.cpp"), "#include <torch/extension.h>\n" + CPP_SOURCE + _BINDING),
                   _write_source(os.path.join(directory, "cuda.cu"), cuda)]
        _extension = load(
            name=MODULE_NAME, sources=sources,
            extra_cuda_cflags=["-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}"] + NVCC_OPTIONS,
            extra_cflags=CXX_OPTIONS, build_directory=directory, verbose=verbose)
    return _extension
)PY";

const char* const kTaskModelCode = R"PY(

def _draw(shape, dtype, init, generator, device):
    """A tensor drawn as a task's init says (normal, uniform, randint, constant, zeros, ones,
    arange, kaiming_uniform)."""
    dtype = _DTYPES[dtype]
    draw = torch.float64 if dtype == torch.float64 else torch.float32 if dtype.is_floating_point else torch.int64
    kind = init["kind"]
    if kind == "normal":
        t = torch.empty(shape, dtype=draw, device=device).normal_(init["mean"], init["std"], generator=generator)
    elif kind == "uniform":
        t = torch.empty(shape, dtype=draw, device=device).uniform_(init["low"], init["high"], generator=generator)
    elif kind == "randint":
        t = torch.empty(shape, dtype=draw, device=device).random_(int(init["low"]), int(init["high"]), generator=generator)
    elif kind == "constant":
        t = torch.full(shape, init["value"], dtype=draw, device=device)
    elif kind == "zeros":
        t = torch.zeros(shape, dtype=draw, device=device)
    elif kind == "ones":
        t = torch.ones(shape, dtype=draw, device=device)
    elif kind == "arange":
        t = torch.arange(math.prod(shape), dtype=draw, device=device).reshape(shape)
    elif kind == "kaiming_uniform":
        bound = 1.0 / math.sqrt(math.prod(shape[1:]))
        t = torch.empty(shape, dtype=draw, device=device).uniform_(-bound, bound, generator=generator)
    else:
        raise ValueError(f"unknown init kind {kind!r}")
    return t.to(dtype)


def _attribute(name):
    return name if name.isidentifier() and not hasattr(torch.nn.Module, name) else "param_" + name


class ModelNew(torch.nn.Module):
    """The task's reference, computed by KernelSkill's kernel. forward(*inputs)."""

    def __init__(self, size="default", seed=SEED, parameter_shapes=None, module=None):
        """The parameters' shapes are those of `size`, or `parameter_shapes` (a list, in
        PARAMETERS' order) for other shapes (served by the general-shape launcher). A
        parameter that is an attribute of the task's reference module (init kind
        "module") is read from `module`, that module as you load it (torch.jit.load)."""
        super().__init__()
        if parameter_shapes is None and size not in SIZES:
            raise ValueError(f"size {size!r}: this export has {', '.join(SIZES)}; or give parameter_shapes")
        generator = torch.Generator().manual_seed(seed)
        shapes = parameter_shapes if parameter_shapes is not None else SIZES[size][len(INPUTS):]
        self._names = []
        for (name, dtype, init), shape in zip(PARAMETERS, shapes):
            if init["kind"] == "module":
                if module is None:
                    raise ValueError(f"ModelNew (task {TASK}): parameter {name} is the reference module's "
                                     f"{init['attr']}: give ModelNew(module=torch.jit.load(...)) the task's module")
                value = module
                for part in init["attr"].split("."):
                    value = getattr(value, part)
                value = value.detach().clone()
            else:
                value = _draw(shape, dtype, init, generator, "cpu")
            attr = _attribute(name)
            if value.is_floating_point():
                self.register_parameter(attr, torch.nn.Parameter(value, requires_grad=False))
            else:
                self.register_buffer(attr, value)
            self._names.append(attr)

    def task_parameters(self):
        """The parameters in the order the reference's forward() takes them after the inputs."""
        return [getattr(self, a) for a in self._names]

    def forward(self, *inputs):
        if len(inputs) != len(INPUTS):
            raise TypeError(f"ModelNew (task {TASK}) takes {len(INPUTS)} inputs "
                            f"({', '.join(n for n, _, _ in INPUTS)}), got {len(inputs)}")
        outputs = _forward(list(inputs) + self.task_parameters(), False)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def forward_general(self, *inputs):
        """forward() through the general-shape launcher even at the exported sizes (which
        forward() serves with launchers specialised at export time): to check it."""
        if not GENERAL_LAUNCHER:
            raise RuntimeError(f"ModelNew (task {TASK}): no general-shape launcher in this export: {GENERAL_NOTE}")
        outputs = _forward(list(inputs) + self.task_parameters(), True)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def get_inputs(size="default", seed=0, device="cuda"):
    """The task's inputs at `size`, drawn on `device` as the task says."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return [_draw(shape, dtype, init, generator, device)
            for (name, dtype, init), shape in zip(INPUTS, SIZES[size][:len(INPUTS)])]


def get_init_inputs():
    return []
)PY";

// The Python file: a docstring, the task's constants, CUDA_SOURCE, then the module's
// code: the task's own ModelNew, or for a task imported from KernelBench one with
// KernelBench's interface (export/kernelbench_module.hpp).
result<std::string> python_file(const task_spec& task, const candidate& best, const std::vector<size_variant>& variants,
                                const pytorch_export& ex) {
  const bool kernelbench = export_detail::has_kernelbench_interface(task);
  std::string kernelbench_constants;
  if (kernelbench) {
    auto c = export_detail::kernelbench_constants(task);
    if (!c) return error{c.message()};
    kernelbench_constants = *c;
  }
  std::ostringstream p;
  p << "# ModelNew for KernelSkill task '" << task.name << "', written by `kernelskill export`.\n"
    << "# Candidate " << (best.id.empty() ? std::string("(no id)") : best.id)
    << (best.origin.empty() ? std::string() : ", " + best.origin) << ".\n";
  if (kernelbench) {
    p << export_detail::kernelbench_docstring(task, join(ex.sizes, ", "), ex.general_launcher_note.empty())
      << "import inspect\nimport numbers\nimport os\nimport types\n\nimport torch\n\n";
  } else {
    p << "\"\"\"The kernel KernelSkill found for task "
      << py_string(task.name).substr(1, py_string(task.name).size() - 2) << ", as a PyTorch module.\n\n"
      << "    model = ModelNew().cuda()             # the task's parameters, drawn as the task says\n"
      << "    y = model(*get_inputs())              # builds the extension on first use (nvcc)\n\n"
      << "forward() takes the task's inputs; the parameters are module parameters, in the\n"
      << "reference's order in model.task_parameters(). Inputs of the shapes of these sizes: " << join(ex.sizes, ", ")
      << "\n"
      << "(see SIZES) run a launcher specialised at export time; "
      << (ex.general_launcher_note.empty() ? "other shapes run one that evaluates\nthe launch plan at run time.\n"
                                           : "other shapes raise a RuntimeError.\n")
      << "\"\"\"\n"
      << "import math\nimport os\n\nimport torch\n\n";
  }
  p << "TASK = " << py_string(task.name) << "\n"
    << "CANDIDATE = " << py_string(best.id) << "\n"
    << "MODULE_NAME = " << py_string(ex.module_name) << "\n"
    << "# (name, dtype, init) of each input, then of each parameter, in the reference's order.\n"
    << "INPUTS = [\n";
  for (auto& t : task.inputs)
    p << "    (" << py_string(t.name) << ", " << py_string(t.dtype) << ", " << py_distribution(t.init) << "),\n";
  p << "]\nPARAMETERS = [\n";
  for (auto& t : task.parameters)
    p << "    (" << py_string(t.name) << ", " << py_string(t.dtype) << ", " << py_distribution(t.init) << "),\n";
  p << "]\n# The shapes the launcher runs at: size -> shape of each input, then each parameter.\nSIZES = {\n";
  for (const auto& v : variants) {
    p << "    " << py_string(v.name) << ": [";
    for (size_t i = 0; i < v.shapes.size(); ++i) p << (i ? ", " : "") << shape_list(v.shapes[i]);
    p << "],\n";
  }
  p << "}\n";
  if (!ex.skipped_sizes.empty()) {
    p << "# Sizes of the task the plan does not resolve at, left out:\n";
    for (auto& s : ex.skipped_sizes) p << "#   " << s << "\n";
  }
  p << "# Other shapes go to a launcher that evaluates the plan's expressions at run time.\n"
    << "GENERAL_LAUNCHER = " << (ex.general_launcher_note.empty() ? "True" : "False") << "\n"
    << "GENERAL_NOTE = " << py_string(ex.general_launcher_note) << "\n";
  // Where the plan is launch-bound (plan/launch_bound.hpp, the reviewer's rule), forward
  // replays it as one CUDA graph (export/cuda_graph.py).
  p << "# Sizes whose plan is launch-bound, replayed as one CUDA graph: size -> why.\nCUDA_GRAPHS = {\n";
  for (const auto& v : variants) {
    uint64_t bytes = 0;
    for (size_t k = 0; k < v.shapes.size(); ++k) {
      const tensor_spec& t = k < task.inputs.size() ? task.inputs[k] : task.parameters[k - task.inputs.size()];
      int64_t n = 1;
      for (int64_t d : v.shapes[k]) n *= d;
      bytes += static_cast<uint64_t>(std::max<int64_t>(n * dtype_size(t.dtype), 0));
    }
    const plan_weight w = weigh_plan(v.plan, bytes);
    if (launch_bound(w))
      p << "    " << py_string(v.name) << ": " << py_string("launch-bound plan (" + describe_weight(w) + ")") << ",\n";
  }
  p << "}\n";
  p << "TOLERANCE = {\"atol\": " << number(task.tolerance.atol) << ", \"rtol\": " << number(task.tolerance.rtol)
    << "}\n"
    << "SEED = " << task.seed << "\n"
    << "NVCC_OPTIONS = [" <<
      [&] {
        std::vector<std::string> q;
        for (auto& o : ex.nvcc_options) q.push_back(py_string(o));
        return join(q, ", ");
      }()
    << "]\n"
    << "# The host compiler's options for CPP_SOURCE (the launcher, where it is there).\n"
    << "CXX_OPTIONS = [" << py_string(kHostOptimisation) << "]\n\n"
    << "# Whether the launcher is with the kernels in CUDA_SOURCE (compiled after PyTorch's\n"
    << "# header), not in CPP_SOURCE.\nLAUNCHER_IN_CUDA = " << (ex.launcher_in_cuda ? "True" : "False") << "\n"
    << "CPP_SOURCE = " << py_block_string(ex.cpp_source) << "\n\n"
    << "CUDA_SOURCE = " << py_block_string(ex.cuda_source) << "\n\n";
  const std::string graphs(embedded::cuda_graph_py());
  if (kernelbench)
    p << kernelbench_constants << "\n" << kExtensionCode << graphs << export_detail::kernelbench_module_code();
  else
    p << kDtypesCode << kExtensionCode << graphs << kTaskModelCode;
  return p.str();
}

}  // namespace

const std::string& export_detail::host_launch_runtime() {
  static const std::string text = kHostLaunch;
  return text;
}

result<pytorch_export> export_pytorch(const task_spec& task, const candidate& best,
                                      const pytorch_export_options& options) {
  const std::string what = "export of task '" + task.name + "'";
  if (task.torchscript.empty() && task.module_bytes.empty()) return error{what + ": the task has no reference"};
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list)
      if (!aten_dtype(t.dtype))
        return error{what + ": tensor '" + t.name + "': dtype " + t.dtype + " cannot be exported"};
  if (task.inputs.empty() && task.parameters.empty())
    return error{what + ": the task has no input tensors (the launcher takes its device from them)"};
  auto nvcc = nvcc_options(best.compile_options);
  if (!nvcc) return error{what + ": " + nvcc.message()};

  pytorch_export ex;
  auto variants = resolve_sizes(task, best, options, what, ex);
  if (!variants) return error{variants.message()};
  const auto kernels = extract_kernel_signatures(best.source);
  std::set<std::string> launched;
  for (const auto& v : *variants)
    for (const auto& s : v.plan.steps)
      if (s.kind == "kernel") launched.insert(s.name);

  // Kernel declarations for a host-compiler check of the launcher.
  for (const auto& name : launched) {
    const kernel_signature* k = find_kernel(kernels, name);
    if (!k) return error{what + ": the plan launches '" + name + "', which the source does not define"};
    ex.kernel_declarations += "extern \"C\" void " + name + "(" + k->params_text() + ");\n";
  }

  // The launcher goes to CPP_SOURCE where it can (docs/export.md, "How the extension is
  // built"): compiled by the host compiler beside nvcc's compile of the kernels alone.
  // KS_EXPORT_LAUNCHER=nvcc keeps it in CUDA_SOURCE, as exports were built before: a way
  // back while the host-compiled launcher has not yet run on every GPU machine.
  bool host_split = host_launcher_in_cpp(launched, kernels);
  if (const char* place = std::getenv("KS_EXPORT_LAUNCHER"); place && *place) {
    const std::string p = place;
    if (p != "nvcc" && p != "host")
      return error{what + ": KS_EXPORT_LAUNCHER is '" + p +
                   "': expected 'host' (the launcher compiled by the host compiler, the default) or 'nvcc' "
                   "(with the kernels)"};
    if (p == "nvcc") host_split = false;
  }
  auto l = launcher(task, best, *variants, kernels, host_split, what, ex);
  if (!l) return error{l.message()};
  ex.launcher = *l;
  if (host_split) {
    ex.cpp_source = cpp_source(task, best, kernels, launched, ex);
    ex.cuda_source = cuda_source(task, best, "");
  } else {
    ex.cpp_source = "std::vector<at::Tensor> ks_forward(const std::vector<at::Tensor>& tensors, bool general);\n";
    ex.cuda_source = cuda_source(task, best, ex.launcher);
    ex.launcher_in_cuda = true;
  }
  ex.module_name =
      "ks_" + ident(task.name) + "_" + sha256_hex(ex.cuda_source + ex.cpp_source + join(*nvcc, " ")).substr(0, 12);
  ex.nvcc_options = *nvcc;
  auto py = python_file(task, best, *variants, ex);
  if (!py) return error{what + ": " + py.message()};
  ex.python = std::move(*py);
  return ex;
}

result<std::string> pytorch_module_source(const task_spec& task, const candidate& best) {
  auto ex = export_pytorch(task, best);
  if (!ex) return error{ex.message()};
  return std::move(ex->python);
}

result<std::string> shared_module_source(const task_spec& task, const candidate& best) {
  task_spec plain = task;
  plain.kernelbench = kernelbench_spec{};
  return pytorch_module_source(plain, best);
}

}  // namespace ks
