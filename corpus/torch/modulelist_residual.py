"""An nn.ModuleList of pre-norm residual MLP blocks iterated in forward (the MLP-Mixer/ResMLP pattern), built from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D, DEPTH = {"small": (2, 8, 32, 2), "full": (16, 256, 512, 8)}[SIZE]


class ResidualBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


class Model(nn.Module):
    def __init__(self, depth=DEPTH):
        super().__init__()
        self.blocks = nn.ModuleList([ResidualBlock(D) for _ in range(depth)])
        self.final = nn.LayerNorm(D)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.final(x)


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return [DEPTH]
