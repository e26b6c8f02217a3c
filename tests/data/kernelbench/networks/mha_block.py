import torch
import torch.nn as nn

# As level 3's 31_VisionAttention and 28_VisionTransformer: nn.MultiheadAttention
# (self-attention, its (output, weights) tuple unpacked and the weights dropped), a
# residual and a LayerNorm, on a feature map viewed as a sequence.


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super(Model, self).__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        B, C, H, W = x.shape
        x = x.view(B, C, H * W).permute(2, 0, 1)
        attn_output, _ = self.attn(x, x, x)
        x = self.norm(attn_output + x)
        return x.permute(1, 2, 0).view(B, C, H, W)


batch_size = 2
embed_dim = 16
num_heads = 4
height = 3
width = 5


def get_inputs():
    return [torch.rand(batch_size, embed_dim, height, width)]


def get_init_inputs():
    return [embed_dim, num_heads]
