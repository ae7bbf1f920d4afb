"""dw3x3s2_96_112: one convolution at a realistic size (session 31 A/B)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(96, 96, 3, stride=2, padding=1, groups=96, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(32, 96, 112, 112)]


def get_init_inputs():
    return []
