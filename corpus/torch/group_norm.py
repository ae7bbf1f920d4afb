"""nn.Conv2d + nn.GroupNorm + nn.SiLU (the normalisation block of diffusion U-Nets), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, C, HW, GROUPS = {"small": (2, 8, 8, 4), "full": (16, 256, 64, 32)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(GROUPS, C, eps=1e-6)
        self.act = nn.SiLU()
        self.conv = nn.Conv2d(C, C, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(self.act(self.norm(x)))


def get_inputs():
    return [torch.randn(B, C, HW, HW)]


def get_init_inputs():
    return []
