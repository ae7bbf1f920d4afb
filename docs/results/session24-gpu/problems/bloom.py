"""transformers' BloomModel from a small BloomConfig (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import BloomConfig, BloomModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = BloomConfig(**{'vocab_size': 128, 'hidden_size': 512, 'n_layer': 4, 'n_head': 8}, attn_implementation="eager")
        self.model = BloomModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(input_ids=x).last_hidden_state


def get_inputs():
    return [torch.randint(0, 128, (8, 256))]


def get_init_inputs():
    return []
