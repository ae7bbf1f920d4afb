import torch
import torch.nn as nn


class Model(nn.Module):
    """padding="same" (PyTorch lowers it to aten.convolution; an even kernel pads first)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(32, 64, 3, padding="same")
        self.b = nn.Conv2d(64, 32, 4, padding="same")

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def get_inputs():
    return [torch.randn(8, 32, 64, 64)]


def get_init_inputs():
    return []
