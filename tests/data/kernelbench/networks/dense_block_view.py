import torch
import torch.nn as nn
import torch.nn.functional as F

# As level 3's DenseNets: each layer's features appended to a list that is concatenated
# after every layer (a list grown in the forward), nn.Dropout(0.0) in training mode,
# and the classifier's input flattened with a size read at run time
# (x.view(x.size(0), -1)).


class Model(nn.Module):
    def __init__(self, num_layers: int, num_input_features: int, growth_rate: int, num_classes: int):
        super(Model, self).__init__()
        layers = []
        for i in range(num_layers):
            layers.append(nn.Sequential(
                nn.BatchNorm2d(num_input_features + i * growth_rate),
                nn.ReLU(inplace=True),
                nn.Conv2d(num_input_features + i * growth_rate, growth_rate, kernel_size=3, padding=1, bias=False),
                nn.Dropout(0.0),
            ))
        self.layers = nn.ModuleList(layers)
        self.classifier = nn.Linear(num_input_features + num_layers * growth_rate, num_classes)

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            new_feature = layer(x)
            features.append(new_feature)
            x = torch.cat(features, 1)
        x = F.adaptive_avg_pool2d(x, (1, 1)).view(x.size(0), -1)
        return self.classifier(x)


batch_size = 2
num_layers = 3
num_input_features = 4
growth_rate = 3
num_classes = 5
height, width = 6, 7


def get_inputs():
    return [torch.rand(batch_size, num_input_features, height, width)]


def get_init_inputs():
    return [num_layers, num_input_features, growth_rate, num_classes]
