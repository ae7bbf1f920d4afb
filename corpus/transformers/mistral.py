"""Mistral (transformers' MistralModel, Mistral AI's Mistral-7B architecture: LLaMA layout with grouped-query and sliding-window attention) built from a small MistralConfig with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import MistralConfig, MistralModel

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, VOCAB, D, FF, LAYERS, HEADS, KV, WINDOW = {
    "small": (2, 8, 128, 32, 64, 2, 4, 2, 4),
    "full": (8, 512, 32000, 768, 2048, 8, 12, 4, 256),
}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = MistralConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS,
                               num_attention_heads=HEADS, num_key_value_heads=KV, max_position_embeddings=max(T, 64),
                               sliding_window=WINDOW, attention_dropout=0.0, use_cache=False,
                               attn_implementation="eager")
        self.model = MistralModel(config)
        self.model.eval()

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, VOCAB, (B, T))]


def get_init_inputs():
    return []
