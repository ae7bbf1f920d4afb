"""transformers' DebertaV2Model from a small DebertaV2Config (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import DebertaV2Config, DebertaV2Model


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = DebertaV2Config(**{'vocab_size': 128, 'hidden_size': 512, 'intermediate_size': 1408, 'num_hidden_layers': 4, 'num_attention_heads': 8, 'max_position_embeddings': 512, 'relative_attention': True, 'position_buckets': 64, 'pos_att_type': ['p2c', 'c2p']}, attn_implementation="eager")
        self.model = DebertaV2Model(config)
        self.model.eval()

    def forward(self, x):
        return self.model(input_ids=x).last_hidden_state


def get_inputs():
    return [torch.randint(0, 128, (8, 256))]


def get_init_inputs():
    return []
