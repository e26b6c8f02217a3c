import socket
import torch

# Reaches for the network while it is imported.
socket.create_connection(("127.0.0.1", 9), timeout=1)

class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.rand(4, 4)]

def get_init_inputs():
    return []
