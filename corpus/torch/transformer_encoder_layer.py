"""nn.TransformerEncoderLayer (post-norm, ReLU, batch_first) from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D, H, FF = {"small": (2, 8, 32, 4, 64), "full": (16, 256, 512, 8, 2048)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(D, H, dim_feedforward=FF, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
