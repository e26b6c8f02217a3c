"""Writes the saved TorchScript modules of tests/reference_test.cpp's [untrusted][fork]
case: modules whose forward reaches a file operator by a path the graph's inlining does
not enter (torch.jit.fork of a scripted function, of a method, nested forks, a fork in a
loop, a method of a TorchScript class), and one whose fork only computes.

    /usr/bin/python3 tests/data/untrusted/make_modules.py tests/data/untrusted

Every module's forward(x) takes x of shape [4] (untrusted_task.yaml beside them). The
hostile ones read MARKER_READ (torch.from_file) or write MARKER_WRITTEN (torch.save):
the test creates the first and checks that the second never appears.
"""
import os
import sys
from typing import List

import torch

MARKER_READ = "/tmp/ks-untrusted-secret"  # written literally below: TorchScript reads no globals
MARKER_WRITTEN = "/tmp/ks-untrusted-written.pt"


@torch.jit.script
def read_secret(n: int) -> torch.Tensor:
    return torch.from_file("/tmp/ks-untrusted-secret", False, n, dtype=torch.uint8).float()


@torch.jit.script
def write_file(x: torch.Tensor) -> torch.Tensor:
    torch.save(x, "/tmp/ks-untrusted-written.pt")
    return x


@torch.jit.script
def fork_reader(n: int) -> torch.Tensor:
    return torch.jit.wait(torch.jit.fork(read_secret, n))


class ForkFunction(torch.nn.Module):
    """The issue's repro: forward forks a scripted function that calls from_file."""

    def forward(self, x):
        return x + torch.jit.wait(torch.jit.fork(read_secret, 4))


class ForkWrite(torch.nn.Module):
    def forward(self, x):
        return torch.jit.wait(torch.jit.fork(write_file, x)) * 2.0


class ForkNested(torch.nn.Module):
    """A fork whose function forks the reader."""

    def forward(self, x):
        return x + torch.jit.wait(torch.jit.fork(fork_reader, 4))


class ForkInLoop(torch.nn.Module):
    def forward(self, x):
        futures: List[torch.jit.Future[torch.Tensor]] = []
        for i in range(2):
            if i == 1:
                futures.append(torch.jit.fork(read_secret, 4))
        y = x
        for f in futures:
            y = y + torch.jit.wait(f)
        return y


class ForkMethod(torch.nn.Module):
    """A fork of a method of the module itself."""

    @torch.jit.export
    def secret(self, n: int) -> torch.Tensor:
        return torch.from_file("/tmp/ks-untrusted-secret", False, n, dtype=torch.uint8).float()

    def forward(self, x):
        return x + torch.jit.wait(torch.jit.fork(self.secret, 4))


@torch.jit.script
class Reader(object):
    def __init__(self, n: int):
        self.n = n

    def read(self) -> torch.Tensor:
        return torch.from_file("/tmp/ks-untrusted-secret", False, self.n, dtype=torch.uint8).float()


@torch.jit.script
def through_class(n: int) -> torch.Tensor:
    return Reader(n).read()


class ForkClass(torch.nn.Module):
    """A fork of a function that calls a TorchScript class's method."""

    def forward(self, x):
        return x + torch.jit.wait(torch.jit.fork(through_class, 4))


@torch.jit.script
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0


class ForkComputes(torch.nn.Module):
    """A fork that only computes: it loads and runs."""

    def forward(self, x):
        return torch.jit.wait(torch.jit.fork(double, x)) + 1.0


def main() -> int:
    out = sys.argv[1]
    for cls, file in [(ForkFunction, "fork_function.pt"), (ForkWrite, "fork_write.pt"),
                      (ForkNested, "fork_nested.pt"), (ForkInLoop, "fork_in_loop.pt"),
                      (ForkMethod, "fork_method.pt"), (ForkClass, "fork_class.pt"),
                      (ForkComputes, "fork_computes.pt")]:
        torch.jit.save(torch.jit.script(cls()), os.path.join(out, file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
