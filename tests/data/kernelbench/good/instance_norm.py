import torch
import torch.nn as nn

class Model(nn.Module):
    """Instance Normalization: scripting leaves a rank check (prim::If) in the graph."""
    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inorm(x)

batch_size = 4
features = 5
dim1 = 9
dim2 = 11

def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]

def get_init_inputs():
    return [features]
