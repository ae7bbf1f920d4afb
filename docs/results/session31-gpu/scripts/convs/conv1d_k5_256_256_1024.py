"""conv1d_k5_256_256_1024: one convolution at a realistic size (session 31 A/B)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(256, 256, 5, padding=2, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(32, 256, 1024)]


def get_init_inputs():
    return []
