"""Checks an imported task against the KernelBench problem it came from, in Python:
kernelbench_import_test writes the inputs the C++ side drew for a trial and the outputs
its reference (the imported module) computed; this builds the problem's own Model as
KernelBench's evaluator does (seed 42 before get_init_inputs and before Model), runs it
on those inputs (numbers that get_inputs passes are taken from get_inputs) and compares.

    python3 check_against_model.py PROBLEM.py INPUTS.pt OUTPUTS.pt
Exit status 0 when every output matches within 1e-5, 1 otherwise (the reason printed).
"""
import importlib.util
import sys

import torch


def main():
    problem_path, inputs_path, outputs_path = sys.argv[1:4]
    spec = importlib.util.spec_from_file_location("problem", problem_path)
    problem = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(problem)
    torch.manual_seed(42)
    init = problem.get_init_inputs()
    torch.manual_seed(42)
    model = problem.Model(*init)
    # Files the test wrote (LibTorch's pickle of a tensor list): trusted, and not a
    # plain state dict, which PyTorch 2.6's default weights_only=True would require.
    tensors = iter(torch.load(inputs_path, weights_only=False))
    args = [next(tensors) if isinstance(v, torch.Tensor) else v for v in problem.get_inputs()]
    with torch.no_grad():
        want = model(*args)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = torch.load(outputs_path, weights_only=False)
    if len(got) != len(want):
        print(f"{len(got)} outputs, the Model returns {len(want)}")
        return 1
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            print(f"output {k}: {g.dtype} {tuple(g.shape)}, the Model gives {w.dtype} {tuple(w.shape)}")
            return 1
        if not torch.allclose(g.double(), w.double(), atol=1e-5, rtol=1e-5):
            print(f"output {k}: max abs difference {(g.double() - w.double()).abs().max().item():.3g}")
            return 1
    print("matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
