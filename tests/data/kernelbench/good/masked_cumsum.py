import torch
import torch.nn as nn

class Model(nn.Module):
    """Cumulative sum of the elements a boolean mask keeps."""
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)

batch_size = 8
input_shape = (30,)
dim = 1

def get_inputs():
    x = torch.randn(batch_size, *input_shape)
    mask = torch.randint(0, 2, x.shape).bool()
    return [x, mask]

def get_init_inputs():
    return [dim]
