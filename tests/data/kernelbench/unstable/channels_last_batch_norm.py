import torch
import torch.nn as nn

class Model(nn.Module):
    """Training-mode batch norm of nearly equal values held channels-last. PyTorch's
    CPU kernel sums a channels-last tensor's channels in one piece per thread, so one
    thread and two round differently, and the tiny variance magnifies it past 1e-4:
    a reference that disagrees with itself (ks-emulate calls it unstable)."""
    def __init__(self, channels):
        super(Model, self).__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x * 0.01 + 100).contiguous(memory_format=torch.channels_last)
        return self.bn(x)

batch_size = 2
channels = 8
height = 16
width = 16

def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]

def get_init_inputs():
    return [channels]
