import torch
import torch.nn as nn

# As level 3's 36-38: a bidirectional nn.LSTM given its initial state as a tuple
# (h0, c0), whose (output, (h_n, c_n)) is taken apart: a Linear on the output's last
# step, and the final cell state, both returned.


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super(Model, self).__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=0.0, bidirectional=True)
        self.fc = nn.Linear(hidden_size * 2, output_size)

    def forward(self, x, h0, c0):
        out, state = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :]), state[1]


batch_size = 3
sequence_length = 5
input_size = 6
hidden_size = 8
num_layers = 2
output_size = 4


def get_inputs():
    return [torch.rand(batch_size, sequence_length, input_size),
            torch.rand((num_layers * 2, batch_size, hidden_size)),
            torch.rand((num_layers * 2, batch_size, hidden_size))]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size]
