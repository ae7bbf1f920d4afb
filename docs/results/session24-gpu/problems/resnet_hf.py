"""transformers' ResNetModel from a small ResNetConfig (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import ResNetConfig, ResNetModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = ResNetConfig(**{'embedding_size': 64, 'hidden_sizes': [256, 512, 1024], 'depths': [2, 2, 2], 'layer_type': 'bottleneck'})
        self.model = ResNetModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(pixel_values=x).last_hidden_state


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
