import torch

class Model(torch.nn.Module):
    """Builds forever: a problem that runs for minutes on the CPU."""
    def __init__(self):
        super().__init__()
        while True:
            pass

    def forward(self, x):
        return x

def get_inputs():
    return [torch.rand(4, 4)]

def get_init_inputs():
    return []
