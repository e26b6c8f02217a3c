# For bench_cli_test "[bounds]": a KernelBench-format problem whose file hangs when it is
# loaded while KS_HANG_WARM names a file, as a problem whose compile never ends would: it
# waits on a child that sleeps for ten minutes, whose pid it appends to that file so the
# test can see it was killed. Without KS_HANG_WARM it is a plain ReLU.
import os

import torch

if os.environ.get("KS_HANG_WARM"):
    import subprocess

    child = subprocess.Popen(["sleep", "600"])
    with open(os.environ["KS_HANG_WARM"], "a") as f:
        f.write(f"{child.pid}\n")
    child.wait()


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
