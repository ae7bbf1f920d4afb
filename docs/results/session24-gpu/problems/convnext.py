"""transformers' ConvNextModel from a small ConvNextConfig (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import ConvNextConfig, ConvNextModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = ConvNextConfig(**{'num_channels': 3, 'hidden_sizes': [96, 192, 384, 768], 'depths': [1, 1, 3, 1]})
        self.model = ConvNextModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(pixel_values=x).last_hidden_state


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
