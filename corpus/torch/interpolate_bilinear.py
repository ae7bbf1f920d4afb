"""F.interpolate(mode="bilinear", align_corners=False) to a fixed size plus a skip connection (FPN top-down merge), from PyTorch's torch.nn.functional (BSD-3), random weights."""

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, C, HW = {"small": (2, 4, 8), "full": (16, 256, 56)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lateral = nn.Conv2d(C, C, kernel_size=1)

    def forward(self, coarse, fine):
        up = F.interpolate(coarse, size=fine.shape[-2:], mode="bilinear", align_corners=False)
        return self.lateral(fine) + up


def get_inputs():
    return [torch.randn(B, C, HW // 2, HW // 2), torch.randn(B, C, HW, HW)]


def get_init_inputs():
    return []
