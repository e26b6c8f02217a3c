def _problem_module():
    """The problem's own code, run once in a namespace of its own: its module-level names
    (batch_size, Model, ...) neither leak into this module nor clash with the caller's."""
    module = types.ModuleType("kernelbench_problem_" + "".join(c if c.isalnum() else "_" for c in TASK))
    exec(compile(PROBLEM_SOURCE, f"<KernelBench problem {TASK}>", "exec"), module.__dict__)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise ImportError(f"ModelNew (task {TASK}): the problem's source defines no {name}")
    return module


_PROBLEM = _problem_module()
_SIGNATURE = inspect.signature(_PROBLEM.Model.forward)
# When every argument get_inputs passes is a task input, a call with that many tensors
# by position binds them in order: input k of INPUTS is argument _INPUT_POSITIONS[k]
# (the last that names it, as the binding in ModelNew._kernel_tensors takes it).
_ARGUMENT_OF = {task_input: k for k, (_, task_input, _) in enumerate(ARGUMENTS)}
_TENSORS_ONLY = None not in _ARGUMENT_OF and all(name in _ARGUMENT_OF for name, _, _ in INPUTS)
_INPUT_POSITIONS = [_ARGUMENT_OF[name] for name, _, _ in INPUTS] if _TENSORS_ONLY else []
get_inputs = _PROBLEM.get_inputs
get_init_inputs = _PROBLEM.get_init_inputs


def _walk(value, path):
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _same_number(given, expected):
    if isinstance(given, torch.Tensor) or not isinstance(given, numbers.Number):
        return False
    if expected != expected:  # nan: only nan is the same
        return given != given
    return given == expected


class ModelNew(torch.nn.Module):
    """The problem's Model computed by KernelSkill's kernel: ModelNew(*get_init_inputs()),
    forward with Model.forward's arguments."""

    def __init__(self, *init_inputs, **init_kwargs):
        super().__init__()
        # The first thing that draws from torch's generator: under the caller's seed the
        # weights are exactly those of Model(*init_inputs). Nothing is compiled here.
        self.model = _PROBLEM.Model(*init_inputs, **init_kwargs)

    def reference(self, *args, **kwargs):
        """The problem's own Model.forward, on the same weights."""
        return self.model(*args, **kwargs)

    def task_parameters(self):
        """The tensors the kernel takes after the inputs, read from the Model now (so that
        .to() and .cuda() on this module move them), in the task's order."""
        slots = self._parameter_slots()
        if slots is None:
            return [_walk(self.model, path) for _, path in MODEL_PARAMETERS]
        return [held[key] for held, key in slots]

    def _parameter_slots(self):
        """Where each task parameter is held: (its module's _parameters or _buffers, its
        name), found once per Model. Walking each path through nn.Module.__getattr__ on
        every call cost about 4 us a parameter on the GPU machine (20_MobileNetV2, 314
        parameters: 2.77 ms a call measured beside eager, 1.49 ms the reviewer's replay
        of the same graph; 1.8 us a parameter on the CPU machine). A parameter or buffer that
        .to(), .double() or an assignment replaces is in the same dict under the same
        name, so it is read anew; a submodule replaced after the first call is not seen
        (the kernel computes the Model as it was exported anyway). None where a path
        ends elsewhere (an attribute that is neither): then every call walks the paths."""
        if getattr(self, "_slots_of", None) is not self.model:
            slots = []
            for _, path in MODEL_PARAMETERS:
                owner, _, name = path.rpartition(".")
                module = _walk(self.model, owner) if owner else self.model
                held = getattr(module, "_parameters", None)
                if held is None or name not in held:
                    held = getattr(module, "_buffers", None)
                if held is None or name not in held or held[name] is None:
                    slots = None
                    break
                slots.append((held, name))
            self._slots, self._slots_of = slots, self.model
        return self._slots

    def _kernel_tensors(self, args, kwargs):
        """The task's inputs in its order, then its parameters on the inputs' device; a
        number other than the kernel's is a ValueError, a tensor missing a TypeError."""
        if not kwargs and _TENSORS_ONLY and len(args) == len(ARGUMENTS) and all(isinstance(a, torch.Tensor) for a in args):
            # The usual call (get_inputs' tensors, by position): what the binding below
            # gives it, without its cost (tens of microseconds a call).
            inputs = [args[k] for k in _INPUT_POSITIONS]
            device = inputs[0].device
            return inputs + [t if t.device == device else t.to(device) for t in self.task_parameters()]
        bound = _SIGNATURE.bind(self, *args, **kwargs)  # Model.forward's own TypeError
        bound.apply_defaults()
        tensors, k = {}, 0
        for p in list(_SIGNATURE.parameters.values())[1:]:
            given = bound.arguments[p.name]
            if p.kind == p.VAR_KEYWORD:
                if given:
                    raise TypeError(f"ModelNew (task {TASK}): the kernel takes no keyword arguments "
                                    f"{sorted(given)}; model.reference(...) runs the problem's Model")
                continue
            for value in (given if p.kind == p.VAR_POSITIONAL else (given,)):
                if k < len(ARGUMENTS):
                    name, task_input, expected = ARGUMENTS[k]
                    if task_input is not None:
                        if not isinstance(value, torch.Tensor):
                            raise TypeError(f"ModelNew (task {TASK}): {name} must be a tensor, got "
                                            f"{type(value).__name__}")
                        tensors[task_input] = value
                    elif not _same_number(value, expected):
                        raise ValueError(
                            f"ModelNew (task {TASK}): {name} is {value!r}, but the kernel was made for "
                            f"{name} = {expected!r} (the value the problem's get_inputs passes, a constant "
                            "of the kernel); model.reference(...) runs the problem's Model for other "
                            "values, or import the problem with that value and export again")
                elif p.kind == p.VAR_POSITIONAL:
                    raise TypeError(f"ModelNew (task {TASK}) takes {len(ARGUMENTS)} arguments, got more")
                elif not (value is p.default or _same_number(value, p.default)):
                    raise ValueError(
                        f"ModelNew (task {TASK}): {p.name} is {value!r}, but the kernel was made with "
                        f"its default {p.default!r} (get_inputs does not pass it); model.reference(...) "
                        "runs the problem's Model for other values")
                k += 1
        if k < len(ARGUMENTS):
            raise TypeError(f"ModelNew (task {TASK}) takes {len(ARGUMENTS)} arguments "
                            f"({', '.join(a[0] for a in ARGUMENTS)}), got {k}")
        inputs = [tensors[name] for name, _, _ in INPUTS]
        device = inputs[0].device
        return inputs + [t if t.device == device else t.to(device) for t in self.task_parameters()]

    def _run(self, args, kwargs, general):
        tensors = self._kernel_tensors(args, kwargs)
        if self.model.training != TRAINING:
            raise RuntimeError(
                f"ModelNew (task {TASK}): the kernel computes the problem's Model in "
                f"{'training' if TRAINING else 'eval'} mode (as KernelBench runs it), and this model is in "
                f"{'training' if self.model.training else 'eval'} mode; model.reference(...) runs the "
                "problem's Model in its mode")
        outputs = _forward(tensors, general)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def forward(self, *args, **kwargs):
        return self._run(args, kwargs, False)

    def forward_general(self, *args, **kwargs):
        """forward() through the general-shape launcher even at the exported sizes (which
        forward() serves with launchers specialised at export time): to check it."""
        if not GENERAL_LAUNCHER:
            raise RuntimeError(f"ModelNew (task {TASK}): no general-shape launcher in this export: {GENERAL_NOTE}")
        return self._run(args, kwargs, True)


# forward() and forward_general() show Model.forward's signature (inspect, and the
# arguments' binding above).
ModelNew.forward.__signature__ = _SIGNATURE
ModelNew.forward_general.__signature__ = _SIGNATURE
