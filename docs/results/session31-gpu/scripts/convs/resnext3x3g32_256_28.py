"""resnext3x3g32_256_28: one convolution at a realistic size (session 31 A/B)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(256, 256, 3, padding=1, groups=32, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(32, 256, 28, 28)]


def get_init_inputs():
    return []
