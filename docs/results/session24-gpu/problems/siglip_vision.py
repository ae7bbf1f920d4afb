"""transformers' SiglipVisionModel from a small SiglipVisionConfig (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import SiglipVisionConfig, SiglipVisionModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = SiglipVisionConfig(**{'hidden_size': 512, 'intermediate_size': 1408, 'num_hidden_layers': 4, 'num_attention_heads': 8, 'image_size': 224, 'patch_size': 16}, attn_implementation="eager")
        self.model = SiglipVisionModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(pixel_values=x).last_hidden_state


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
