import torch
import torch.nn as nn

# As level 3's 39-42: nn.GRU over a sequence with the initial state passed in, its
# (output, h_n) tuple unpacked; the output and the final state are both returned, of a
# bidirectional GRU of two layers.


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super(Model, self).__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, True, False, dropout=0, bidirectional=True)

    def forward(self, x, h0):
        output, h_n = self.gru(x, h0)
        return output, h_n


seq_len = 5
batch_size = 3
input_size = 6
hidden_size = 8
num_layers = 2


def get_inputs():
    return [torch.rand(seq_len, batch_size, input_size), torch.rand((num_layers * 2, batch_size, hidden_size))]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
