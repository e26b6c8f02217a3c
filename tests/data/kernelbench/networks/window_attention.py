import torch
import torch.nn as nn
import torch.nn.functional as F

# As level 3's 30_SwinTransformerV2: traced (its blocks are a ModuleList indexed by a
# variable, which TorchScript refuses), so the sizes read in forward are traced as
# numbers turned into tensors and back (H // window: prim::NumToTensor, floor_divide,
# aten::Int); cosine attention in windows with a learnt scale clamped by a tensor
# constant, and a relative-position bias gathered by an integer index buffer.


class WindowAttention(nn.Module):
    def __init__(self, dim, window, heads):
        super().__init__()
        self.window = window
        self.heads = heads
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.table = nn.Parameter(0.1 * torch.randn((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid([torch.arange(window), torch.arange(window)], indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += window - 1
        rel[:, :, 1] += window - 1
        rel[:, :, 0] *= 2 * window - 1
        self.register_buffer("index", rel.sum(-1))

    def forward(self, x):
        B, H, W, C = x.shape
        w = self.window
        x = x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, C)
        B_, N, _ = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1.0 / 0.01))).exp()
        attn = attn * scale
        bias = self.table[self.index.view(-1)].view(N, N, -1).permute(2, 0, 1)
        attn = (attn + bias.unsqueeze(0)).softmax(dim=-1)
        x = self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))
        x = x.view(B, H // w, W // w, w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
        return x


class Model(nn.Module):
    def __init__(self, dim, window, heads, depth):
        super().__init__()
        self.blocks = nn.ModuleList([WindowAttention(dim, window, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        for i in range(len(self.blocks)):
            x = x + self.blocks[i](self.norm(x))
        return x


batch_size = 2
height = 6
width = 9
dim = 16
window = 3
heads = 2
depth = 2


def get_inputs():
    return [torch.rand(batch_size, height, width, dim)]


def get_init_inputs():
    return [dim, window, heads, depth]
