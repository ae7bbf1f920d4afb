"""nn.TransformerEncoder of pre-norm GELU layers with a final LayerNorm, from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D, H, FF, LAYERS = {"small": (2, 8, 32, 4, 64, 2), "full": (16, 256, 512, 8, 2048, 6)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, H, dim_feedforward=FF, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=LAYERS, norm=nn.LayerNorm(D),
                                             enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
