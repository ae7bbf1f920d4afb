"""transformers' MobileNetV2Model from a small MobileNetV2Config (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import MobileNetV2Config, MobileNetV2Model


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = MobileNetV2Config(**{'image_size': 32, 'depth_multiplier': 0.25})
        self.model = MobileNetV2Model(config)
        self.model.eval()

    def forward(self, x):
        return self.model(pixel_values=x).last_hidden_state


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
