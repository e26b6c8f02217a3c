import torch
import torch.nn as nn

class Model(nn.Module):
    """Group Normalization: a parameterised norm whose checks loop over the sizes."""
    def __init__(self, num_features: int, num_groups: int):
        super(Model, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)

batch_size = 4
features = 8
num_groups = 2
dim1 = 6
dim2 = 7

def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]

def get_init_inputs():
    return [features, num_groups]
