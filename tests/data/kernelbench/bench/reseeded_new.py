import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The Model's computation with weights drawn after a seed of its own: not the
    Model's weights, so not its result."""
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        torch.manual_seed(7)
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.linear(x)) / self.divisor
