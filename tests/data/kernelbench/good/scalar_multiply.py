import torch
import torch.nn as nn

class Model(nn.Module):
    """A matrix times a Python float that get_inputs passes: traced, the float bound in."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s

M = 32
N = 20

def get_inputs():
    A = torch.rand(M, N)
    s = 3.14
    return [A, s]

def get_init_inputs():
    return []
