import torch
import torch.nn as nn

class Model(nn.Module):
    """Smooth L1 (Huber) loss; scripting unpacks broadcast tensors (prim::ListUnpack)."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.smooth_l1_loss(predictions, targets)

batch_size = 32
input_shape = (40,)

def get_inputs():
    scale = torch.rand(())
    return [torch.rand(batch_size, *input_shape) * scale, torch.rand(batch_size, *input_shape)]

def get_init_inputs():
    return []
