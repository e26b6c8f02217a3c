import torch

class Model(torch.nn.Module):
    """Dropout in training mode (as KernelBench runs models): random outputs."""
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(p=0.5)

    def forward(self, x):
        return self.drop(x) * 2

def get_inputs():
    return [torch.rand(4, 4)]

def get_init_inputs():
    return []
