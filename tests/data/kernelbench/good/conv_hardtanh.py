import torch
import torch.nn as nn

class Model(nn.Module):
    """Conv2d then Hardtanh with integer bounds (which torch.jit.script refuses): traced."""
    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.hardtanh = nn.Hardtanh(min_val=-1, max_val=1)

    def forward(self, x):
        return self.hardtanh(self.conv(x) * 3)

batch_size = 2
in_channels = 3
out_channels = 4
height, width = 10, 9
kernel_size = 3

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
