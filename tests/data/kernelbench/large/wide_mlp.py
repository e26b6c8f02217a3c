import torch
import torch.nn as nn

# As level 3's 1_MLP and 2_ShallowWideMLP, whose weights are 2.7 and 8.6 GB: two wide
# Linear layers, 512 MiB of weights. Lowering reads only their shapes: the graph export
# must not hold the weights more than once.


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(Model, self).__init__()
        self.network = nn.Sequential(nn.Linear(input_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, output_size))

    def forward(self, x):
        return self.network(x)


batch_size = 2
input_size = 4096
hidden_size = 16384
output_size = 4096


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
