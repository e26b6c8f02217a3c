import torch
import ks_no_such_package  # as level 3's Mamba2 problems import einops

# Imports a package no Python has: the import names it and says how to get it.


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
