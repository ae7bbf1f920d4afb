"""transformers' OPTModel from a small OPTConfig (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import OPTConfig, OPTModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = OPTConfig(**{'vocab_size': 128, 'hidden_size': 512, 'ffn_dim': 1408, 'num_hidden_layers': 4, 'num_attention_heads': 8, 'word_embed_proj_dim': 512, 'max_position_embeddings': 512}, attn_implementation="eager")
        self.model = OPTModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(input_ids=x).last_hidden_state


def get_inputs():
    return [torch.randint(0, 128, (8, 256))]


def get_init_inputs():
    return []
