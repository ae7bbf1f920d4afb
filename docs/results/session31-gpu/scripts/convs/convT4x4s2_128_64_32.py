"""convT4x4s2_128_64_32: one convolution at a realistic size (session 31 A/B)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 128, 32, 32)]


def get_init_inputs():
    return []
