"""BERT (transformers' BertModel, Google's BERT encoder: learned positions, token types, post-norm layers, GELU) built from a small BertConfig with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import BertConfig, BertModel

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, VOCAB, D, FF, LAYERS, HEADS = {
    "small": (2, 8, 128, 32, 64, 2, 4),
    "full": (16, 256, 30522, 768, 3072, 12, 12),
}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = BertConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS,
                            num_attention_heads=HEADS, max_position_embeddings=max(T, 64),
                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                            attn_implementation="eager")
        self.model = BertModel(config, add_pooling_layer=False)
        self.model.eval()

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, VOCAB, (B, T))]


def get_init_inputs():
    return []
