import torch
import torch.nn as nn

# As level 3's 46/47_NetVlad: soft assignments to clusters, the ghost clusters cut off
# with assignment[:, :clusters]. Traced (the helper takes **kwargs, which TorchScript
# refuses), the slice over dim 0 keeps its whole length with an end of INT64_MAX, a
# number the graph holds as a double (2^63), which the plan's library step must write
# back as INT64_MAX (not INT64_MIN: an empty slice).


def cut(t, **spec):
    return t[:, : spec["keep"]]


class Model(nn.Module):
    def __init__(self, features, clusters, ghosts):
        super().__init__()
        self.clusters = clusters
        self.weight = nn.Parameter(torch.randn(features, clusters + ghosts) * 0.1)

    def forward(self, x):
        rows = x.reshape(-1, x.size(-1))
        assignment = torch.softmax(torch.matmul(rows, self.weight), dim=1)
        assignment = cut(assignment, keep=self.clusters)
        return assignment * 2.0


def get_inputs():
    return [torch.randn(3, 7, 16)]


def get_init_inputs():
    return [16, 5, 2]
