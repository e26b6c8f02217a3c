import torch
import torch.nn as nn


class Model(nn.Module):
    """
    L2-normalises rows the way torch.norm does in PyTorch 2.x once scripted: a branch on
    the tensor's layout and device type (not on its values) picks linalg.vector_norm.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.layout == torch.strided and x.device.type in ("cpu", "cuda", "meta"):
            return x / torch.linalg.vector_norm(x, 2, [1], True)
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


batch_size = 24
dim = 80


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
