import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """What good/gemm_relu_divide.py's Model computes, layer for layer."""
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.linear(x)) / self.divisor
