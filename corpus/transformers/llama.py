"""LLaMA (transformers' LlamaModel, Meta's LLaMA architecture: RMSNorm, rotary embeddings, SwiGLU, grouped-query attention) built from a small LlamaConfig with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import LlamaConfig, LlamaModel

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, VOCAB, D, FF, LAYERS, HEADS, KV = {
    "small": (2, 8, 128, 32, 64, 2, 4, 2),
    "full": (8, 512, 32000, 768, 2048, 8, 12, 4),
}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS,
                             num_attention_heads=HEADS, num_key_value_heads=KV, max_position_embeddings=max(T, 64),
                             attention_dropout=0.0, use_cache=False, attn_implementation="eager")
        self.model = LlamaModel(config)
        self.model.eval()

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, VOCAB, (B, T))]


def get_init_inputs():
    return []
