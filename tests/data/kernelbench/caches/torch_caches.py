import os
import tempfile

import torch
import torch.nn as nn


class Model(nn.Module):
    """A ReLU whose get_inputs makes directories where PyTorch 2 keeps its caches, as
    PyTorch 2.11 does on the first operation it dispatches."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
                "TORCH_EXTENSIONS_DIR"):
        os.makedirs(os.path.join(os.environ[var], "ks-cache"), exist_ok=True)
    os.makedirs(os.path.join(tempfile.gettempdir(), "ks-cache"), exist_ok=True)
    x = torch.rand(8, 8)
    return [x * 2 - 1]


def get_init_inputs():
    return []
