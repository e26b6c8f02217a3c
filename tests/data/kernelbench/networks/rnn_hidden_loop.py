import torch
import torch.nn as nn

# As level 3's 34_VanillaRNNHidden: the initial state moved to the input's device
# (h0.to(x.device), a move to the GPU the task runs on), a loop over the sequence
# whose length is read from x.size(), each step's output appended to a list and the
# list stacked at the end.


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super(Model, self).__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        seq_len, batch_size, _ = x.size()
        hidden = h0.to(x.device)
        outputs = []
        for t in range(seq_len):
            combined = torch.cat((x[t], hidden), dim=1)
            hidden = self.tanh(self.i2h(combined))
            outputs.append(self.h2o(hidden))
        return torch.stack(outputs, dim=0)


sequence_length = 4
batch_size = 3
input_size = 6
hidden_size = 5
output_size = 2


def get_inputs():
    return [torch.rand(sequence_length, batch_size, input_size), torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
