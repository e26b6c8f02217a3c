import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The Model's result plus 2e-3: within KernelBench's old 1e-2, not within 1e-4."""
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.linear(x)) / self.divisor + 2e-3
