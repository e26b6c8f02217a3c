from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _in_projection_packed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor,
                          b: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
    # nn.MultiheadAttention's in-projection as PyTorch 2.x writes it: the self-attention
    # branch returns three selects of one projection as a List[Tensor], which the caller
    # unpacks (prim::ListUnpack of a prim::ListConstruct once the `is` checks fold).
    E = q.size(-1)
    if k is v:
        if q is k:
            proj = F.linear(q, w, b)
            proj = proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
            return proj[0], proj[1], proj[2]
        else:
            w_q, w_kv = w.split([E, E * 2])
            if b is None:
                b_q = b_kv = None
            else:
                b_q, b_kv = b.split([E, E * 2])
            kv_proj = F.linear(k, w_kv, b_kv)
            kv_proj = kv_proj.unflatten(-1, (2, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
            return (F.linear(q, w_q, b_q), kv_proj[0], kv_proj[1])
    else:
        w_q, w_k, w_v = w.chunk(3)
        if b is None:
            b_q = b_k = b_v = None
        else:
            b_q, b_k, b_v = b.chunk(3)
        return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


class Model(nn.Module):
    """
    A packed query/key/value projection, then q * k + v.
    """

    def __init__(self, embed_dim):
        super(Model, self).__init__()
        self.in_proj_weight = nn.Parameter(torch.randn(3 * embed_dim, embed_dim) * 0.1)
        self.in_proj_bias = nn.Parameter(torch.randn(3 * embed_dim) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = _in_projection_packed(x, x, x, self.in_proj_weight, self.in_proj_bias)
        return q * k + v


batch_size = 4
seq_len = 6
embed_dim = 32


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim]
