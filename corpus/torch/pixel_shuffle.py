"""Sub-pixel convolution upsampler: nn.Conv2d + nn.PixelShuffle(2) + ReLU (ESPCN, Shi et al. 2016), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, C, HW, R = {"small": (2, 4, 8, 2), "full": (16, 64, 128, 2)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(C, C * R * R, kernel_size=3, padding=1)
        self.shuffle = nn.PixelShuffle(R)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.shuffle(self.conv(x)))


def get_inputs():
    return [torch.randn(B, C, HW, HW)]


def get_init_inputs():
    return []
