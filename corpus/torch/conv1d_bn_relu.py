"""nn.Conv1d + nn.BatchNorm1d + nn.ReLU, twice (a 1-D CNN block as in audio/sequence models), from PyTorch's torch.nn (BSD-3), random weights, eval mode."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, C_IN, C, L = {"small": (2, 4, 8, 32), "full": (32, 64, 256, 1024)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv1d(C_IN, C, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm1d(C),
            nn.ReLU(),
            nn.Conv1d(C, C, kernel_size=5, padding=2, bias=False),
            nn.BatchNorm1d(C),
            nn.ReLU(),
        )
        self.eval()

    def forward(self, x):
        return self.block(x)


def get_inputs():
    return [torch.randn(B, C_IN, L)]


def get_init_inputs():
    return []
