import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.diagonal_scatter(x, x.diagonal(0, -2, -1).exp(), 0, -2, -1)


def get_inputs():
    return [torch.randn(256, 128, 128)]


def get_init_inputs():
    return []
