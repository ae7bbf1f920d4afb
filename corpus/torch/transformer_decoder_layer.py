"""nn.TransformerDecoderLayer (self-attention, cross-attention, feed-forward; batch_first) from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, S, D, H, FF = {"small": (2, 8, 6, 32, 4, 64), "full": (16, 128, 256, 512, 8, 2048)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(D, H, dim_feedforward=FF, dropout=0.0, batch_first=True)

    def forward(self, tgt, memory):
        return self.layer(tgt, memory)


def get_inputs():
    return [torch.randn(B, T, D), torch.randn(B, S, D)]


def get_init_inputs():
    return []
