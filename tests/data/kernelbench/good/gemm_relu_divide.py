import torch
import torch.nn as nn

class Model(nn.Module):
    """A linear layer, ReLU, then division by a constant (KernelBench level 2 style)."""
    def __init__(self, in_features, out_features, divisor):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor
    
    def forward(self, x):
        x = self.linear(x)
        x = torch.relu(x)  
        # then the division	(as KernelBench's files have them: trailing blanks, a tab, “quotes”)
        x = x / self.divisor
        return x

batch_size = 32
in_features = 64
out_features = 48
divisor = 2.0

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, divisor]
