"""nn.Upsample(scale_factor=2, mode="nearest") + 3x3 conv (the upsampling step of U-Nets and FPNs), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, C, HW = {"small": (2, 4, 8), "full": (16, 128, 64)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = nn.Conv2d(C, C, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(self.up(x))


def get_inputs():
    return [torch.randn(B, C, HW, HW)]


def get_init_inputs():
    return []
