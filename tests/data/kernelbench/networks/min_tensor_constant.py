import torch
import torch.nn as nn

# As level 2's 31_Conv2d_Min_Add_Multiply (and the other epilogues that bound a
# convolution by a constant): torch.min / torch.max of a tensor and a 0-dim tensor made
# in forward from a number of the module (torch.tensor(self.c)), and torch.minimum of
# the same kind, and (as level 2's 93_ConvTranspose2d_Add_Min_GELU_Multiply) one made
# on the input's device (torch.tensor(c, device=x.device)). Scripted: the constant
# tensors are folded into the graph.


class Model(nn.Module):
    def __init__(self, channels, out_channels, kernel, low, high):
        super().__init__()
        self.conv = nn.Conv2d(channels, out_channels, kernel)
        self.low = low
        self.high = high
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, torch.tensor(self.high))
        x = torch.max(x, torch.tensor(self.low))
        x = torch.minimum(x + self.bias, torch.tensor(self.high))
        x = torch.max(x, torch.tensor(-0.125, device=x.device))
        return x * 2.0


def get_inputs():
    return [torch.randn(3, 5, 11, 9)]


def get_init_inputs():
    return [5, 7, 3, -0.25, 0.5]
