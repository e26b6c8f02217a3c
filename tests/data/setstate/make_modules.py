"""Writes the saved TorchScript modules of tests/reference_test.cpp's [setstate] case:
modules whose __setstate__ (run by torch.jit.load while loading) does what a reference
may not, and one whose __setstate__ only computes.

    /usr/bin/python3 tests/data/setstate/make_modules.py tests/data/setstate

Each module's forward(x) is x * w for a tensor attribute w of 4 elements; the task
(setstate_task.yaml beside them) declares x of shape [4]. Every hostile __setstate__
also marks its run: it prints "SETSTATE-RAN" (or reads /etc/hostname into w).
"""
import os
import sys
from typing import Tuple

import torch


class Printing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.ones(4)

    def forward(self, x):
        return x * self.w

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        print("SETSTATE-RAN")
        self.w = state[0]
        self.training = state[1]


class Reading(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.ones(4)

    def forward(self, x):
        return x * self.w

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        self.w = torch.from_file("/etc/hostname", False, 4, dtype=torch.uint8).float()
        self.training = state[1]


class ThroughHelper(torch.nn.Module):
    """The print is in a method __setstate__ calls: the check follows the call."""

    def __init__(self):
        super().__init__()
        self.w = torch.ones(4)

    def forward(self, x):
        return x * self.w

    @torch.jit.export
    def announce(self, w: torch.Tensor) -> torch.Tensor:
        print("SETSTATE-RAN")
        return w

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        self.w = self.announce(state[0])
        self.training = state[1]


class Outer(torch.nn.Module):
    """The hostile __setstate__ is a submodule's."""

    def __init__(self):
        super().__init__()
        self.inner = Printing()

    def forward(self, x):
        return self.inner(x)


class Computing(torch.nn.Module):
    """A __setstate__ that only computes: it loads, and forward gives x * 2."""

    def __init__(self):
        super().__init__()
        self.w = torch.ones(4)

    def forward(self, x):
        return x * self.w

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        self.w = state[0] * 2.0
        self.training = state[1]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, cls in [("printing", Printing), ("reading", Reading), ("helper", ThroughHelper),
                      ("nested", Outer), ("computing", Computing)]:
        torch.jit.save(torch.jit.script(cls()), os.path.join(out, name + ".pt"))


if __name__ == "__main__":
    main()
