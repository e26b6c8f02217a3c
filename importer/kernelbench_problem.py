"""Turns one KernelBench problem file into a KernelSkill task (a YAML file and a saved
TorchScript module). `kernelskill import kernelbench` runs this script once per problem,
with the user's Python and PyTorch, in a child bounded in CPU time, memory and wall
clock, inside a private directory (importer/kernelbench_import.hpp).

What it promises:
- the task means what the problem means: the module is `Model(*get_init_inputs())`
  built after the seed KernelBench's evaluator sets (so its weights are the weights
  KernelBench's `Model` gets), scripted in training mode as KernelBench runs it; every
  tensor its forward reads from its attributes is declared as a parameter of kind
  `module`; inputs are drawn from the distributions `get_inputs()` draws from (plain
  kinds where it calls torch.rand / randn / randint alone, an input program otherwise);
- the task carries the problem itself (reference.kernelbench: its source exactly, where
  Model sits in the module, forward's arguments as tensors or numbers), so that
  `kernelskill export` can write a ModelNew with KernelBench's interface;
- or it refuses, with one line naming the construct and the file (exit status 3);
- what it prints on standard output is one JSON object: {"name", "notes"} or {"error"}.

The problem's own code runs under an audit hook that refuses file writes, network
access and new processes: a problem that tries gets a clear error rather than doing it.
The hook catches what a problem does by accident or carelessness; the operating-system
limits around this process are what bound a hostile one.
"""

import argparse
import importlib.util
import inspect
import json
import keyword
import math
import os
import sys


class Refusal(Exception):
    """A problem the importer cannot express: its message names the construct."""


# The answer goes to the real standard output; whatever the problem prints goes to
# standard error (sys.stdout points there once main() starts), so it cannot corrupt it.
_answer = sys.stdout


def emit(obj):
    _answer.write(json.dumps(obj) + "\n")
    _answer.flush()


# ---------------------------------------------------------------------------------
# The guard around the problem's own code.

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_NETWORK = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
            "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
            "urllib.Request", "http.client.connect", "ftplib.connect", "smtplib.connect")
_PROCESS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
            "os.fork", "os.forkpty", "os.kill", "os.killpg", "pty.spawn", "os.startfile")
_FILESYSTEM = ("os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.mkdir",
               "os.truncate", "os.chmod", "os.chown", "os.link", "os.symlink", "os.utime",
               "shutil.rmtree", "shutil.copyfile", "shutil.move", "shutil.copytree")


def install_guard():
    # Scratch space torch itself may use (PyTorch 2 makes temporary directories while
    # tracing and compiling, and its caches on the first operation): the private
    # directory's tmp/, which TMPDIR names and where the importer points the caches.
    scratch = os.path.realpath(os.environ.get("TMPDIR", "/nonexistent")) + os.sep

    def in_scratch(path):
        try:
            return isinstance(path, (str, bytes, os.PathLike)) and \
                os.path.realpath(os.fsdecode(path)).startswith(scratch)
        except (TypeError, ValueError):
            return False

    def hook(event, args):
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes and not in_scratch(path):
                raise PermissionError(f"the problem may not write files (it opened {path!r} for writing)")
        elif event in _NETWORK:
            raise PermissionError(f"the problem may not use the network ({event})")
        elif event in _PROCESS:
            raise PermissionError(f"the problem may not start or signal processes ({event})")
        elif event in _FILESYSTEM and not (args and in_scratch(args[0])):
            where = f" {os.fsdecode(args[0])!r}" if args and isinstance(args[0], (str, bytes, os.PathLike)) else ""
            raise PermissionError(f"the problem may not change files ({event}{where})")

    sys.addaudithook(hook)


# ---------------------------------------------------------------------------------
# Recording get_inputs(): the factories make meta tensors that remember how they were
# made, so that nothing of the published size is allocated and the recipe can be
# written as TorchScript.

SCALAR_TYPES = {}  # torch.dtype -> c10::ScalarType number, filled by main()


def recorder(torch):
    real_factories = {n: getattr(torch, n) for n in ("rand", "randn", "randint", "zeros", "ones", "full", "arange")}
    lines = []  # "t3 = <expr>" in the order made
    # Torch's own code (the meta kernels written in Python, in PyTorch 2) calls the
    # factories too: only the problem's calls are recorded, torch's reach the real ones.
    depth = [0]
    counter = [0]

    class Recorded(torch.Tensor):
        @staticmethod
        def __new__(cls, meta, expr):
            r = torch.Tensor._make_subclass(cls, meta)
            counter[0] += 1
            r._ks_var = f"t{counter[0]}"
            r._ks_expr = expr
            lines.append(f"{r._ks_var} = {expr}")
            return r

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            depth[0] += 1
            try:
                with torch._C.DisableTorchFunction():
                    out = func(*unwrap(args), **unwrap(kwargs))
            finally:
                depth[0] -= 1
            if isinstance(out, torch.Tensor):
                return Recorded(out, expression(func, args, kwargs))
            if isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out):
                raise Refusal(f"get_inputs calls {describe(func)}, which returns several tensors; "
                              "the importer records single-tensor operations only")
            return out  # shapes, sizes, dtypes: static, written as literals

    def unwrap(v):
        if isinstance(v, Recorded):
            with torch._C.DisableTorchFunction():
                return v.as_subclass(torch.Tensor)
        if isinstance(v, (list, tuple)):
            return type(v)(unwrap(x) for x in v)
        if isinstance(v, dict):
            return {k: unwrap(x) for k, x in v.items()}
        return v

    def describe(func):
        return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))

    def literal(v):
        if isinstance(v, Recorded):
            return v._ks_var
        if isinstance(v, torch.Tensor):
            raise Refusal("get_inputs uses a tensor that no torch factory made "
                          "(e.g. torch.tensor or from_numpy); the importer records torch.rand, "
                          "randn, randint, zeros, ones, full and arange and operations on them")
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            if math.isnan(v):
                return "float('nan')"
            if math.isinf(v):
                return "float('inf')" if v > 0 else "-float('inf')"
            return repr(v)
        if isinstance(v, torch.dtype):
            # TorchScript compiled from C++ has no torch.float32 to name: a dtype is its
            # ScalarType number there.
            if v not in SCALAR_TYPES:
                raise Refusal(f"get_inputs uses dtype {v}, which the importer does not write")
            return str(SCALAR_TYPES[v])
        if isinstance(v, (list, tuple, torch.Size)):
            return "[" + ", ".join(literal(x) for x in v) + "]"
        if v is None:
            return "None"
        if isinstance(v, str):
            return repr(v)
        raise Refusal(f"get_inputs passes a {type(v).__name__} to a torch operation; "
                      "the importer writes numbers, lists, dtypes and tensors only")

    binary = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/",
              "__div__": "/", "__matmul__": "@", "__pow__": "**", "__floordiv__": "//"}
    reflected = {"__radd__": "+", "__rsub__": "-", "__rmul__": "*", "__rtruediv__": "/",
                 "__rdiv__": "/", "__rmatmul__": "@", "__rpow__": "**"}

    conversions = {"bool": torch.bool, "float": torch.float32, "double": torch.float64,
                   "half": torch.float16, "bfloat16": torch.bfloat16, "int": torch.int32,
                   "long": torch.int64}

    def arguments(args, kwargs):
        parts = [literal(a) for a in args]
        parts += [f"{k}={literal(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def expression(func, args, kwargs):
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property: x.T, x.mT
            prop = getattr(func, "__self__", None)
            x = args[0]
            if prop is torch.Tensor.T:
                return f"{x._ks_var}.permute({literal(list(reversed(range(x.dim()))))})"
            if prop is torch.Tensor.mT:
                return f"{x._ks_var}.transpose(-2, -1)"
            raise Refusal(f"get_inputs reads a tensor property ({prop}) the importer does not know")
        if name in binary and not kwargs:
            return f"({literal(args[0])} {binary[name]} {literal(args[1])})"
        if name in reflected and not kwargs:
            return f"({literal(args[1])} {reflected[name]} {literal(args[0])})"
        if name == "__neg__":
            return f"(-{literal(args[0])})"
        if name.startswith("__"):
            raise Refusal(f"get_inputs uses Tensor.{name} (indexing or an operator the importer "
                          "does not record)")
        if name in conversions and getattr(torch.Tensor, name, None) is func and len(args) == 1 and not kwargs:
            return f"{literal(args[0])}.to({literal(conversions[name])})"  # TorchScript has no Tensor.bool()
        if getattr(torch.Tensor, name, None) is func:
            return f"{literal(args[0])}.{name}({arguments(args[1:], kwargs)})"
        for space in (torch, torch.nn.functional):
            if getattr(space, name, None) is func and hasattr(torch, name):
                return f"torch.{name}({arguments(args, kwargs)})"
        raise Refusal(f"get_inputs calls {describe(func)}, which has no torch.* equivalent "
                      "that TorchScript compiles")

    def sizes(args, kwargs):
        if "size" in kwargs:
            s = kwargs.pop("size")
            return list(s) if isinstance(s, (list, tuple, torch.Size)) else [s]
        if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
            return list(args[0])
        return list(args)

    def factory(name, leading=0):
        real = real_factories[name]

        def make(*args, **kwargs):
            for k in ("generator", "out", "layout", "pin_memory"):
                if kwargs.get(k) is not None:
                    raise Refusal(f"get_inputs calls torch.{name} with {k}=; the importer "
                                  "draws from the task's own generator")
            kwargs.pop("device", None)
            kwargs.pop("requires_grad", None)
            lead, rest = list(args[:leading]), args[leading:]
            shape = sizes(rest, kwargs)
            meta = real(*lead, shape, device="meta", **kwargs)
            extra = "".join(f", {k}={literal(v)}" for k, v in kwargs.items())
            lead_text = "".join(f"{literal(a)}, " for a in lead)
            return Recorded(meta, f"torch.{name}({lead_text}{literal(shape)}{extra}, device=device)")

        return make

    factories = {"rand": factory("rand"), "randn": factory("randn"),
                 "randint": None, "zeros": factory("zeros"), "ones": factory("ones"),
                 "full": None, "arange": None, "empty": None}

    def randint(*args, **kwargs):
        # randint(high, size) or randint(low, high, size)
        if "size" not in kwargs and len(args) == 2:
            args = (0,) + tuple(args)
        return factory("randint", leading=2)(*args, **kwargs)

    def full(size, fill_value, dtype=None, **kwargs):
        extra = f", dtype={literal(dtype)}" if dtype is not None else ""
        meta = real_factories["full"](list(size), fill_value, device="meta", **({"dtype": dtype} if dtype else {}))
        return Recorded(meta, f"torch.full({literal(list(size))}, {literal(fill_value)}{extra}, device=device)")

    def arange(*args, **kwargs):
        dtype = kwargs.get("dtype")
        meta = real_factories["arange"](*args, device="meta", **({"dtype": dtype} if dtype else {}))
        extra = f", dtype={literal(dtype)}" if dtype else ""
        return Recorded(meta, f"torch.arange({', '.join(literal(a) for a in args)}{extra}, device=device)")

    def empty(*args, **kwargs):
        raise Refusal("get_inputs calls torch.empty: uninitialised memory is not a distribution")

    factories.update(randint=randint, full=full, arange=arange, empty=empty)

    def only_outermost(name, f):
        def call(*args, **kwargs):
            if depth[0]:
                return real_factories.get(name, original_empty if name == "empty" else None)(*args, **kwargs)
            depth[0] += 1
            try:
                return f(*args, **kwargs)
            finally:
                depth[0] -= 1
        return call

    original_empty = torch.empty
    guarded = {name: only_outermost(name, f) for name, f in factories.items()}
    return Recorded, lines, guarded, literal


def record_inputs(torch, problem):
    Recorded, lines, factories, literal = recorder(torch)
    saved = {name: getattr(torch, name) for name in factories}
    try:
        for name, f in factories.items():
            setattr(torch, name, f)
        values = problem.get_inputs()
    finally:
        for name, f in saved.items():
            setattr(torch, name, f)
    if not isinstance(values, (list, tuple)):
        raise Refusal(f"get_inputs returned {type(values).__name__}; expected a list of tensors")
    return Recorded, lines, list(values)


# ---------------------------------------------------------------------------------
# The module.

RANDOM_OPS = ("aten::bernoulli", "aten::rand", "aten::randn", "aten::randint", "aten::normal",
              "aten::multinomial", "aten::randperm", "aten::uniform_", "aten::exponential_",
              "aten::rrelu", "aten::rand_like", "aten::randn_like", "aten::randint_like")
DROPOUTS = ("aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
            "aten::feature_alpha_dropout", "aten::dropout_", "aten::alpha_dropout_")


def source_line(text):
    """The source line a TorchScript message points at (the one above "<--- HERE")."""
    lines = [l for l in text.splitlines() if l.strip()]
    for k, line in enumerate(lines):
        if "<--- HERE" in line and k > 0:
            return lines[k - 1].strip()[:100]
    return ""


def where(node):
    line = source_line(node.sourceRange())
    return f" at `{line}`" if line else ""


def refuse_random(torch, scripted):
    """A forward that draws random numbers (dropout in training mode) has no fixed
    output to check a kernel against."""
    frozen = torch._C._freeze_module(scripted._c, [], True, True)
    graph = frozen._get_method("forward").graph.copy()
    torch._C._jit_pass_inline(graph)
    torch._C._jit_pass_constant_propagation(graph)
    for node in _all_nodes(graph.block()):
        kind = node.kind()
        if kind in RANDOM_OPS or kind.startswith("aten::rand"):
            raise Refusal(f"forward draws random numbers ({kind}{where(node)}): its outputs "
                          "cannot be checked against a reference")
        if kind in DROPOUTS:
            p, train = [node.inputsAt(i).toIValue() if node.inputsAt(i).node().kind() == "prim::Constant"
                        else None for i in (1, 2)]
            if p == 0 or train is False:
                continue  # draws nothing
            if p is None or train is None or p > 0:
                raise Refusal(f"forward applies {kind} with p={p} in training mode{where(node)}, as "
                              "KernelBench runs it: random, so its outputs cannot be checked")


def _all_nodes(block):
    for node in block.nodes():
        yield node
        for b in node.blocks():
            yield from _all_nodes(b)


def drop_warnings(torch, scripted):
    """Library code warns on suspicious shapes (smooth_l1_loss, kl_div): aten::warn in
    branches the task's shapes never take. A reference may not print (the worker refuses
    it), and a warning changes no value: forward is inlined and its warnings removed."""
    graph = scripted.forward.graph
    torch._C._jit_pass_inline(graph)
    for node in list(_all_nodes(graph.block())):
        if node.kind() == "aten::warn":
            node.destroy()


def tensor_attributes(torch, scripted):
    """The paths ("bn.weight") of the tensors forward reads from the module, in the
    order it first reads them."""
    graph = scripted.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    self_value = list(graph.inputs())[0]
    objects = {self_value.debugName(): ("", scripted)}
    paths = []
    for node in _all_nodes(graph.block()):
        if node.kind() != "prim::GetAttr":
            continue
        owner = objects.get(node.inputsAt(0).debugName())
        if owner is None:
            continue
        name = node.s("name")
        path = f"{owner[0]}.{name}" if owner[0] else name
        value = getattr(owner[1], name)
        if isinstance(value, torch.Tensor):
            if path not in paths:
                paths.append(path)
        elif isinstance(value, list) and value and all(isinstance(t, torch.Tensor) for t in value):
            # A list of the module's own tensors (a scripted nn.GRU's or nn.LSTM's
            # _flat_weights): the attributes that hold them are parameters, and the graph
            # export builds the list of them (gpu/graph_export.cpp).
            own = dict(owner[1].named_parameters(recurse=False))
            own.update(owner[1].named_buffers(recurse=False))
            prefix = f"{owner[0]}." if owner[0] else ""
            def same(a, b):  # the list may hold other Python objects of the same tensors
                return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
                        and a.dtype == b.dtype)
            for t in value:
                name = next((n for n, o in own.items() if same(o, t)), None)
                if name is not None and prefix + name not in paths:
                    paths.append(prefix + name)
        elif isinstance(value, torch.nn.Module) or hasattr(value, "_c"):
            objects[node.output().debugName()] = (path, value)
    return paths


def lookup(module, path):
    v = module
    for part in path.split("."):
        v = getattr(v, part)
    return v


# ---------------------------------------------------------------------------------
# Writing the task.

DTYPES = {"torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16",
          "torch.float64": "float64", "torch.int32": "int32", "torch.int64": "int64",
          "torch.bool": "bool"}


def dtype_name(dtype, what):
    name = DTYPES.get(str(dtype))
    if name is None:
        raise Refusal(f"{what} has dtype {dtype}; tasks take {', '.join(DTYPES.values())}")
    return name


def identifier(name, taken):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "t"
    if out[0].isdigit():
        out = "t_" + out
    if keyword.iskeyword(out) or out in ("torch", "device", "self"):
        out += "_"
    base, k = out, 2
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


def plain_kind(expr):
    """The task's own distribution for an input drawn by one factory call, else None."""
    import re
    m = re.fullmatch(r"torch\.(rand|randn|zeros|ones)\(\[[0-9, ]*\], device=device\)", expr)
    if m:
        return {"rand": "{kind: uniform, low: 0, high: 1}", "randn": "{kind: normal, mean: 0, std: 1}",
                "zeros": "zeros", "ones": "ones"}[m.group(1)]
    m = re.fullmatch(r"torch\.randint\((-?[0-9]+), (-?[0-9]+), \[[0-9, ]*\], device=device\)", expr)
    if m:
        return f"{{kind: randint, low: {m.group(1)}, high: {m.group(2)}}}"
    return None


def yaml_text(s):
    return json.dumps(s)  # a JSON string is a YAML double-quoted scalar


def literal_safe(text):
    """Whether a literal block (|) reads back as `text` exactly: task/task_loader.cpp's
    rule (one final newline, no tab or carriage return, no trailing blanks)."""
    if not text.endswith("\n") or text.endswith("\n\n") or text.startswith(" "):
        return False
    if any((c < " " and c != "\n") or c in "\x7f\x85\u2028\u2029\ufeff" for c in text):
        return False  # tabs, carriage returns, control characters, YAML's other line breaks
    return all(not line.endswith(" ") for line in text.split("\n"))


def yaml_source(text):
    """A double-quoted YAML scalar that reads back as `text` exactly (UTF-8 kept as it is;
    YAML's other line breaks escaped, or a reader would fold them)."""
    quoted = json.dumps(text, ensure_ascii=False)
    for c in "\x85\u2028\u2029\ufeff":
        quoted = quoted.replace(c, f"\\u{ord(c):04x}")
    return quoted


def write_kernelbench(w, kernelbench):
    """reference.kernelbench: what `kernelskill export` needs for KernelBench's ModelNew
    (the problem's source, where Model sits in the module, forward's arguments)."""
    w("  kernelbench:\n")
    if kernelbench["model_attr"]:
        w(f"    model_attr: {kernelbench['model_attr']}\n")
    w("    arguments:\n")
    for a in kernelbench["arguments"]:
        if "input" in a:
            w(f"      - {{name: {a['name']}, input: {a['input']}}}\n")
        else:
            w(f"      - {{name: {a['name']}, value: {yaml_text(a['value'])}}}\n")
    source = kernelbench["source"]
    if literal_safe(source):
        w("    source: |\n")
        for line in source[:-1].split("\n"):
            w(f"      {line}\n" if line else "\n")
    else:
        w(f"    source: {yaml_source(source)}\n")


def write_task(out, name, description, inputs, program, params, seed, kernelbench):
    w = out.write
    w(f"name: {name}\n")
    w(f"description: {yaml_text(description)}\n")
    w("reference:\n")
    w(f"  module: {name}.pt\n")
    w("  training: true\n")
    if kernelbench:
        write_kernelbench(w, kernelbench)
    w("inputs:\n")
    for i in inputs:
        w(f"  - name: {i['name']}\n    shape: {json.dumps(i['shape'])}\n    dtype: {i['dtype']}\n")
        w(f"    init: {i['init']}\n")
    if program:
        w("input_program: |\n")
        for line in program.splitlines():
            w(f"  {line}\n")
    if params:
        w("parameters:\n")
        for p in params:
            w(f"  - name: {p['name']}\n    shape: {json.dumps(p['shape'])}\n    dtype: {p['dtype']}\n")
            w(f"    init: {{kind: module, attr: {p['attr']}}}\n")
    w(f"seed: {seed}\n")


# ---------------------------------------------------------------------------------

def load_problem(path):
    spec = importlib.util.spec_from_file_location("kernelbench_problem", path)
    if spec is None or spec.loader is None:
        raise Refusal("not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernelbench_problem"] = module
    try:
        spec.loader.exec_module(module)
    except Refusal:
        raise
    except ModuleNotFoundError as e:
        # A package the problem needs that this Python lacks (einops for level 3's
        # Mamba2 problems): name it, the interpreter, and how to get it there.
        package = (e.name or "").split(".")[0] or first_line(e)
        raise Refusal(f"importing it failed: it imports the Python package '{package}', which "
                      f"{sys.executable} does not have: install it for that Python (python3 -m pip "
                      f"install {package}; for Debian's python3 with python3-torch, into a virtual "
                      "environment made with --system-site-packages), then pass that Python with "
                      "--python")
    except BaseException as e:  # the problem's own error, whatever it is
        raise Refusal(f"importing it failed: {type(e).__name__}: {first_line(e)}")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise Refusal(f"it does not define {name} (a KernelBench problem defines Model, "
                          "get_inputs and get_init_inputs)")
    return module


def script_error(e):
    """What TorchScript's compiler objects to, and where: its messages open with a
    schema or a blank line, so the first line alone says little."""
    import re
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    line = source_line(str(e))
    schema = re.compile(r"^[\w.:]+\(.*\) -> .*:$")
    reason = next((l.rstrip(":") for l in lines if not schema.match(l) and "<--- HERE" not in l and
                   not l.startswith("File ") and l != line and l != ":"),
                  lines[0] if lines else type(e).__name__)
    return reason[:200] + (f" at `{line}`" if line else "")


def first_line(e):
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def set_seed(torch, seed):
    # What KernelBench's evaluator does before get_init_inputs, Model and ModelNew.
    torch.manual_seed(seed)


def problem_source(path):
    """The problem file's text, which the task carries for the export; None (and the
    task has no reference.kernelbench) where it is not UTF-8."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def import_problem(args, yaml_out):
    import torch
    source = problem_source(args.problem)  # read before the problem's own code runs
    # c10::ScalarType's numbering, stable across releases.
    SCALAR_TYPES.update({torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
                         torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.bool: 11,
                         torch.bfloat16: 15})
    install_guard()
    problem = load_problem(args.problem)
    set_seed(torch, args.seed)
    try:
        init = problem.get_init_inputs()
    except Refusal:
        raise
    except BaseException as e:
        raise Refusal(f"get_init_inputs failed: {type(e).__name__}: {first_line(e)}")
    if not isinstance(init, (list, tuple)):
        raise Refusal(f"get_init_inputs returned {type(init).__name__}; expected a list")
    set_seed(torch, args.seed)
    try:
        model = problem.Model(*init)
    except BaseException as e:
        raise Refusal(f"Model(*get_init_inputs()) failed: {type(e).__name__}: {first_line(e)}")
    if not isinstance(model, torch.nn.Module):
        raise Refusal("Model is not a torch.nn.Module")

    try:
        Recorded, lines, values = record_inputs(torch, problem)
    except Refusal:
        raise
    except BaseException as e:
        raise Refusal(f"get_inputs failed while recorded: {type(e).__name__}: {first_line(e)}")

    forward_names = [p for p in inspect.signature(model.forward).parameters]
    taken = set()
    inputs, returned, constants = [], [], {}
    arguments = []  # forward's, in get_inputs' order: {"name", "input"} or {"name", "value"}
    for k, v in enumerate(values):
        if isinstance(v, (bool, int, float)) and not isinstance(v, Recorded):
            constants[k] = v  # the same number every call: part of the module
            arguments.append({"label": forward_names[k] if k < len(forward_names) else f"arg{k}",
                              "value": repr(v)})
            continue
        if not isinstance(v, Recorded):
            raise Refusal(f"get_inputs returns a {type(v).__name__} at position {k}; imported "
                          "tasks take tensors and numbers")
        label = forward_names[k] if k < len(forward_names) else f"input{k}"
        inputs.append({"name": identifier(label, taken), "shape": list(v.shape),
                       "dtype": dtype_name(v.dtype, f"input {label}"), "expr": v._ks_expr})
        returned.append(v._ks_var)
        arguments.append({"name": inputs[-1]["name"], "input": inputs[-1]["name"]})
    if not inputs:
        raise Refusal("get_inputs returns no tensors")

    # Plain kinds when every input is one factory call of its own; else one program.
    kinds = [plain_kind(i["expr"]) if len(lines) == len(inputs) else None for i in inputs]
    program = None
    if all(kinds):
        for i, kind in zip(inputs, kinds):
            i["init"] = kind
    else:
        program = program_text(lines, returned)
        for i in inputs:
            i["init"] = "program"
        try:
            torch.jit.CompilationUnit(program)
        except BaseException as e:
            raise Refusal(f"the input program written for get_inputs does not compile: {script_error(e)}")

    # Numbers get names of their own, unlike the inputs' (their names stay as they were).
    argument_names = {i["name"] for i in inputs}
    for a in arguments:
        if "value" in a:
            a["name"] = identifier(a.pop("label"), argument_names)

    notes = []
    scripted = None
    traced = False  # traced modules hold Model as their attribute `inner` (trace())
    if not constants:
        try:
            scripted = torch.jit.script(model)
        except BaseException as e:
            reason = f"torch.jit.script failed: {script_error(e)}"
            notes.append(f"{reason}; traced at the task's shapes instead")
    else:
        reason = f"get_inputs passes the numbers {constants} to forward"
        notes.append(f"{reason}: they are constants of the traced module")
    if scripted is None:
        scripted = trace(torch, model, program_text(lines, returned), inputs, constants, args.trace_bytes, reason)
        traced = True
    scripted.train()
    refuse_random(torch, scripted)
    drop_warnings(torch, scripted)

    params = []
    for path in tensor_attributes(torch, scripted):
        t = lookup(scripted, path)
        params.append({"name": identifier(path.replace(".", "_"), taken), "attr": path,
                       "shape": list(t.shape), "dtype": dtype_name(t.dtype, f"module attribute {path}")})

    # Written by LibTorch's own writer, straight to the file (weights can be gigabytes:
    # an in-memory copy would double them).
    try:
        torch.jit.save(scripted, args.out_module)
    except BaseException as e:
        if "traced" in " ".join(notes):
            raise Refusal(f"torch.jit.save of the traced module failed: {type(e).__name__}: {first_line(e)}")
        # Some scripted modules do not save (recurrent layers' flattened weights in some
        # releases): a trace of the same model does.
        reason = f"torch.jit.save of the scripted module failed: {first_line(e)}"
        notes.append(f"{reason}; traced at the task's shapes instead")
        scripted = trace(torch, model, program_text(lines, returned), inputs, constants, args.trace_bytes, reason)
        traced = True
        scripted.train()
        params = []
        for path in tensor_attributes(torch, scripted):
            t = lookup(scripted, path)
            params.append({"name": identifier(path.replace(".", "_"), set(i["name"] for i in inputs)),
                           "attr": path, "shape": list(t.shape),
                           "dtype": dtype_name(t.dtype, f"module attribute {path}")})
        try:
            torch.jit.save(scripted, args.out_module)
        except BaseException as e2:
            raise Refusal(f"{reason}; and of its trace: {type(e2).__name__}: {first_line(e2)}")

    doc = (inspect.getdoc(problem.Model) or "").strip().splitlines()
    description = f"KernelBench {args.label}" + (f": {doc[0]}" if doc else "") + " (training mode)"
    kernelbench = None
    if source is None:
        notes.append("the problem file is not UTF-8: the task does not carry its source, and its export "
                     "will not have KernelBench's interface")
    else:
        kernelbench = {"source": source, "model_attr": "inner" if traced else "", "arguments": arguments}
    write_task(yaml_out, args.name, description, inputs, program, params, args.seed, kernelbench)
    return {"name": args.name, "inputs": len(inputs), "parameters": len(params),
            "input_program": program is not None, "notes": notes}


def program_text(lines, returned):
    body = "\n".join(f"    {line}" for line in lines)
    return ("def inputs(device: Device) -> List[Tensor]:\n" + body +
            f"\n    return [{', '.join(returned)}]\n")


def trace(torch, model, program, inputs, constants, limit_bytes, reason):
    """The module traced at the task's shapes, with the numbers get_inputs passes bound
    in: for a forward that does not script, or that takes numbers. Tracing runs the
    model once on real inputs, so their size is bounded."""
    element = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8, "bool": 1}
    need = sum(math.prod(i["shape"]) * element[i["dtype"]] for i in inputs)
    if need > limit_bytes:
        raise Refusal(f"tracing would run the model on {need / 2**30:.1f} GiB of inputs, more than "
                      f"the {limit_bytes / 2**30:.1f} GiB allowed (--trace-gib); it would be traced "
                      f"because {reason}")
    unit = torch.jit.CompilationUnit(program)
    real = unit.inputs(torch.device("cpu"))
    count = len(real) + len(constants)

    class Bound(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            it = iter(tensors)
            return self.inner(*[constants[k] if k in constants else next(it) for k in range(count)])

    try:
        with torch.no_grad():
            traced = torch.jit.trace(Bound(model), tuple(real), check_trace=False, strict=False)
    except BaseException as e:
        raise Refusal(f"the model neither scripts nor traces: {type(e).__name__}: {first_line(e)}")
    devices_of_inputs(torch, traced)
    return traced


def devices_of_inputs(torch, traced):
    """torch.jit.trace records `x.device` as the device it traced on, the CPU: a model that
    moves its state or draws random numbers onto its input's device
    (`self.hidden.to(x.device)`, `torch.randn(..., device=x.device)`: level 3's RNNs and
    LSTMs) would keep them on the CPU where the reference runs on the GPU, beside inputs
    on the GPU. Every device constant of the trace becomes the device of forward's first
    tensor input, as the model computes it: a task's tensors are all on one device."""
    graph = traced.forward.graph
    torch._C._jit_pass_inline(graph)
    consts = [n for n in _all_nodes(graph.block())
              if n.kind() == "prim::Constant" and n.output().type().kind() == "DeviceObjType"]
    first = next((v for v in list(graph.inputs())[1:] if v.type().kind() == "TensorType"), None)
    if not consts or first is None:
        return
    device = graph.create("prim::device", [first], 1)
    device.output().setType(torch._C.DeviceObjType.get())
    device.insertBefore(next(iter(graph.nodes())))
    for n in consts:
        n.output().replaceAllUsesWith(device.output())
        n.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--label", required=True, help="how the task's description names the file")
    ap.add_argument("--out-yaml", required=True)
    ap.add_argument("--out-module", required=True)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--trace-gib", type=float, default=4.0)
    args = ap.parse_args()
    args.trace_bytes = int(args.trace_gib * 2**30)
    sys.stdout = sys.stderr
    # Opened before the problem runs: the guard refuses every later write from Python
    # (the module is written by LibTorch's C++ writer, which the guard does not see).
    with open(args.out_yaml, "w") as yaml_out:
        try:
            emit(import_problem(args, yaml_out))
        except Refusal as e:
            emit({"error": str(e)})
            os._exit(3)


if __name__ == "__main__":
    main()
