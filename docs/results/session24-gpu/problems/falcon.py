"""transformers' FalconModel from a small FalconConfig (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import FalconConfig, FalconModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = FalconConfig(**{'vocab_size': 128, 'hidden_size': 512, 'num_hidden_layers': 4, 'num_attention_heads': 8}, attn_implementation="eager")
        self.model = FalconModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(input_ids=x).last_hidden_state


def get_inputs():
    return [torch.randint(0, 128, (8, 256))]


def get_init_inputs():
    return []
