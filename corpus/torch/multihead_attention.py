"""nn.MultiheadAttention used as self-attention (output only, no weights), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D, H = {"small": (2, 8, 32, 4), "full": (16, 256, 512, 8)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)

    def forward(self, x):
        out, _ = self.attn(x, x, x, need_weights=False)
        return out


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
