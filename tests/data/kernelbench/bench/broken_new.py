import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A constructor that does not take get_init_inputs()."""
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x
