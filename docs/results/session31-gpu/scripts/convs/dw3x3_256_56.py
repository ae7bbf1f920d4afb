"""dw3x3_256_56: one convolution at a realistic size (session 31 A/B)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(256, 256, 3, padding=1, groups=256, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 256, 56, 56)]


def get_init_inputs():
    return []
