"""T5 encoder (transformers' T5EncoderModel, Google's T5: RMS-style T5LayerNorm, relative position bias, ReLU feed-forward) built from a small T5Config with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import T5Config, T5EncoderModel

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, VOCAB, D, KV_DIM, FF, LAYERS, HEADS = {
    "small": (2, 8, 128, 32, 8, 64, 2, 4),
    "full": (16, 512, 32128, 512, 64, 2048, 6, 8),
}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = T5Config(vocab_size=VOCAB, d_model=D, d_kv=KV_DIM, d_ff=FF, num_layers=LAYERS, num_heads=HEADS,
                          dropout_rate=0.0, feed_forward_proj="relu", use_cache=False,
                          attn_implementation="eager")
        self.model = T5EncoderModel(config)
        self.model.eval()

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, VOCAB, (B, T))]


def get_init_inputs():
    return []
