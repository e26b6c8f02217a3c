"""Checks a ModelNew exported for a task imported from a KernelBench problem against the
problem itself, in Python with PyTorch on the CPU (kernelbench_export_test runs it; no
GPU, so the extension is never built here: bench/kernelbench/eval_export.sh runs the
real thing through KernelBench's own evaluator on the GPU machine).

    python3 check_export.py PROBLEM.py EXPORT.py MODULE.pt
Exit status 0 when every check holds, 1 otherwise (the reason printed last).

What it checks, in KernelBench's evaluator's order (src/kernelbench/eval.py,
eval_kernel_against_ref): the problem's source and then the export are exec'd into one
namespace, as the evaluator does; set_seed(42), get_init_inputs(), set_seed(42),
Model(*init_inputs), set_seed(42), ModelNew(*init_inputs). Then:
- importing the export and building ModelNew built nothing (no extension loaded, the
  extensions directory untouched) and drew nothing from torch's generator before Model;
- ModelNew holds tensors equal, bit for bit, to Model's (every parameter and buffer) and
  to those of the imported module (MODULE.pt) the kernel was reviewed with, for every
  parameter the kernel takes; its Model is in training mode, as constructed;
- forward's signature is Model.forward's; get_inputs and get_init_inputs are the
  problem's (same values under the same seed); the problem's module-level names do not
  leak into the export's module;
- forward hands the kernel exactly the input tensors it was given (task order) and then
  Model's own parameter tensors, read at call time (after .double(), the new ones; one
  assigned in another's place, that one) from where their modules hold them, without
  walking nn.Module.__getattr__ on every call: the extension's entry point is replaced
  by a recorder for this, as there is no GPU;
- a number argument other than the kernel's is a ValueError naming it (the documented
  choice), the kernel's own number passes; a number where a tensor goes is a TypeError;
  a model put in eval mode is refused with a RuntimeError.
"""
import importlib.util
import inspect
import os
import sys
import tempfile

extensions = tempfile.mkdtemp(prefix="ks-export-check-")
os.environ["TORCH_EXTENSIONS_DIR"] = extensions  # load_extension would build here

import torch  # noqa: E402


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)


def set_seed(seed):
    # KernelBench's set_seed (eval.py): torch.manual_seed, and the CUDA generator's.
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def lookup(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def tensors_of(module):
    return dict(module.named_parameters()) | dict(module.named_buffers())


class Recorder:
    """Stands in for the built extension (which needs nvcc and a GPU): keeps what
    forward() hands to ks_forward."""

    def __init__(self):
        self.calls = []

    def ks_forward(self, tensors, general):
        self.calls.append((list(tensors), general))
        return [torch.zeros(1)]


def run(problem_path, export_path, module_path):
    problem_src = open(problem_path, encoding="utf-8").read()
    export_src = open(export_path, encoding="utf-8").read()

    # The evaluator's sequence, in one namespace.
    context = {}
    exec(compile(problem_src, problem_path, "exec"), context)
    Model, get_init_inputs, get_inputs = context["Model"], context["get_init_inputs"], context["get_inputs"]
    set_seed(42)
    init_inputs = get_init_inputs()
    set_seed(42)
    model = Model(*init_inputs)
    problem_names = {k: v for k, v in context.items() if not k.startswith("__")}
    exec(compile(export_src, export_path, "exec"), context)
    for name, value in problem_names.items():
        if name not in ("Model", "get_inputs", "get_init_inputs"):
            check(context[name] is value, f"exec'ing the export changed the problem's name {name}")
    set_seed(42)
    model_new = context["ModelNew"](*init_inputs)
    after_new = torch.rand(4)
    set_seed(42)
    Model(*init_inputs)
    after_model = torch.rand(4)
    check(torch.equal(after_new, after_model),
          "ModelNew(*init_inputs) drew other random numbers than Model(*init_inputs)")
    check(context["_extension"] is None, "importing the export or building ModelNew loaded the extension")
    check(not os.listdir(extensions), f"something was built in {extensions}: {os.listdir(extensions)}")

    # The weights: Model's, and the imported module's.
    check(model_new.model.training, "ModelNew's Model is not in training mode as constructed")
    want, got = tensors_of(model), tensors_of(model_new.model)
    check(want.keys() == got.keys(), f"ModelNew's Model holds {sorted(got)}, Model holds {sorted(want)}")
    for name in want:
        check(want[name].dtype == got[name].dtype and torch.equal(want[name], got[name]),
              f"{name} differs from Model's")
    saved = torch.jit.load(module_path)
    parameters = model_new.task_parameters()
    check(len(parameters) == len(context["MODEL_PARAMETERS"]), "task_parameters() does not match MODEL_PARAMETERS")
    saved_names = dict(saved.named_parameters()) | dict(saved.named_buffers())
    shapes = context["SIZES"]["default"][len(context["INPUTS"]):]
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
              "float64": torch.float64, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
    for (name, path), value, shape, (_, dtype, _) in zip(context["MODEL_PARAMETERS"], parameters, shapes,
                                                         context["PARAMETERS"]):
        check(value is lookup(model_new.model, path), f"parameter {name} is not the Model's own {path}")
        check(list(value.shape) == shape and value.dtype == dtypes.get(dtype),
              f"parameter {name} ({path}) is {value.dtype} {list(value.shape)}, the kernel takes {dtype} {shape}")
        check(torch.equal(value, lookup(model, path)), f"parameter {name} ({path}) differs from Model's")
        # The module's path is Model's, or under the wrapper a traced import adds (inner.).
        in_module = [t for k, t in saved_names.items() if k == path or k.endswith("." + path)]
        check(len(in_module) == 1, f"the imported module has no single tensor at {path}")
        check(torch.equal(value, in_module[0]),
              f"parameter {name} ({path}) differs from the imported module's, which the kernel was reviewed with")

    # The interface: Model.forward's signature, the problem's own input functions.
    check(inspect.signature(context["ModelNew"].forward) == inspect.signature(Model.forward),
          f"forward{inspect.signature(context['ModelNew'].forward)} is not Model.forward"
          f"{inspect.signature(Model.forward)}")
    check(inspect.signature(model_new.forward) == inspect.signature(model.forward), "bound forward's signature")
    set_seed(7)
    a = context["get_inputs"]()
    set_seed(7)
    b = get_inputs()
    check(len(a) == len(b) and all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
                                   for x, y in zip(a, b)), "get_inputs differs from the problem's")
    check(context["get_init_inputs"]() == get_init_inputs(), "get_init_inputs differs from the problem's")
    spec = importlib.util.spec_from_file_location("exported_alone", export_path)
    alone = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alone)
    for name in problem_names:
        if name not in ("Model", "get_inputs", "get_init_inputs", "torch"):
            check(not hasattr(alone, name), f"the problem's name {name} leaks into the export's module")

    # What forward hands to the kernel.
    recorder = Recorder()
    context["load_extension"] = lambda *a, **k: recorder
    args = get_inputs()
    out = model_new(*args)
    check(torch.equal(out, torch.zeros(1)), "forward does not return the kernel's output")
    handed, general = recorder.calls[-1]
    check(general is False, "forward asked for the general launcher")
    by_input = {task_input: value for (name, task_input, expected), value in zip(context["ARGUMENTS"], args)
                if task_input is not None}
    expected = [by_input[name] for name, _, _ in context["INPUTS"]] + model_new.task_parameters()
    check(len(handed) == len(expected), f"forward handed {len(handed)} tensors, the kernel takes {len(expected)}")
    for k, (h, e) in enumerate(zip(handed, expected)):
        check(h is e, f"tensor {k} handed to the kernel is not the one given (or the Model's own)")
    if context["MODEL_PARAMETERS"]:
        model_new.double()
        model_new(*args)
        check(all(t.dtype == torch.float64 for t in recorder.calls[-1][0][len(context["INPUTS"]):]
                  if t.is_floating_point()), "parameters were not read again after .double()")
        model_new.float()
        check_parameter_reads(context, model_new, args, recorder)

    numbers = [(k, name, v) for k, (name, task_input, v) in enumerate(context["ARGUMENTS"]) if task_input is None]
    for k, name, value in numbers:
        other = list(args)
        other[k] = value + 1
        try:
            model_new(*other)
            raise Failure(f"forward took {name} = {value + 1}, the kernel was made for {value}")
        except ValueError as e:
            check(f"{name} is {value + 1!r}, but the kernel was made for {name} = {value!r}" in str(e),
                  f"the error does not name {name}: {e}")
    tensor_positions = [k for k, (_, task_input, _) in enumerate(context["ARGUMENTS"]) if task_input is not None]
    wrong = list(args)
    wrong[tensor_positions[0]] = 2.0
    try:
        model_new(*wrong)
        raise Failure("forward took a number where a tensor goes")
    except TypeError as e:
        check("must be a tensor" in str(e), f"unexpected message: {e}")
    model_new.eval()
    try:
        model_new(*args)
        raise Failure("forward ran the kernel (made for training mode) in eval mode")
    except RuntimeError as e:
        check("eval mode" in str(e), f"unexpected message: {e}")
    check(not os.listdir(extensions), "something was built")
    return len(numbers)


def check_parameter_reads(context, model_new, args, recorder):
    """A call reads the parameters from the dicts their modules hold them in, without
    nn.Module.__getattr__ (walking each path cost the GPU machine about 4 us a parameter
    a call), and still hands on a parameter or buffer put in one's place."""
    calls = []
    original = torch.nn.Module.__getattr__

    def counting(self, name):
        if self is not model_new:
            calls.append(name)
        return original(self, name)

    model_new(*args)  # where each parameter is held is found once
    torch.nn.Module.__getattr__ = counting
    try:
        model_new(*args)
    finally:
        torch.nn.Module.__getattr__ = original
    check(not calls, f"a call walked the parameters' paths through nn.Module.__getattr__: {calls[:8]}")
    n = len(context["INPUTS"])
    for k, (name, path) in enumerate(context["MODEL_PARAMETERS"]):
        owner, _, attr = path.rpartition(".")
        module = lookup(model_new.model, owner) if owner else model_new.model
        old = getattr(module, attr)
        new = old.detach().clone()
        if isinstance(old, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=False)
        setattr(module, attr, new)
        model_new(*args)
        check(recorder.calls[-1][0][n + k] is getattr(module, attr),
              f"parameter {name} ({path}) put in the old one's place was not handed to the kernel")
        setattr(module, attr, old)


def main():
    try:
        numbers = run(*sys.argv[1:4])
    except Failure as e:
        print(f"FAILED: {e}")
        return 1
    except Exception as e:  # the export's own error where none was expected
        print(f"FAILED: {type(e).__name__}: {e}")
        return 1
    print(f"ok ({numbers} number argument{'s' if numbers != 1 else ''} checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
