import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveMaxPool3d((4, 7, 7))

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(8, 64, 10, 30, 30)]


def get_init_inputs():
    return []
