import os
import subprocess

import torch
import torch.nn as nn

# An exported model whose extension build never ends (as a build of a very large
# model_new.py did, issue 46): load_extension starts a child that sleeps, as nvcc or
# ninja would run, records its pid, and waits for it. side_by_side.py's bounded build
# must kill it, child and all, and record why.
MODULE_NAME = "ks_stuck_build"


def load_extension(build_directory=None, verbose=False):
    child = subprocess.Popen(["sleep", "600"])
    with open(os.path.join(build_directory, "child.pid"), "w") as f:
        f.write(str(child.pid))
    child.wait()


class ModelNew(nn.Module):
    """What good/relu.py's Model computes."""
    def forward(self, x):
        return torch.relu(x)
