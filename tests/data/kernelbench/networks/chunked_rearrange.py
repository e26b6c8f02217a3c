import torch
import torch.nn as nn

# As level 3's 48_Mamba2ReturnY: einops' rearrange cuts the sequence into blocks and
# merges them back. Its helper takes keyword arguments (**lengths), which TorchScript
# refuses, so the model is traced; traced, x.shape gives 0-dim tensors, and the merged
# length (c * l) is computed in place (mul_) before aten::Int reads it as a size.


def split_rows(x, **lengths):
    b, n, h = x.shape
    l = lengths["l"]
    return x.reshape(b, n // l, l, h)


def merge_rows(x):
    b, c, l, h = x.shape
    n = c
    n *= l
    return x.reshape(b, n, h)


class Model(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        blocks = split_rows(x, l=self.block)
        y = torch.cumsum(blocks, dim=2) * 0.5
        return merge_rows(torch.relu(y))


def get_inputs():
    return [torch.randn(2, 12, 5)]


def get_init_inputs():
    return [4]
