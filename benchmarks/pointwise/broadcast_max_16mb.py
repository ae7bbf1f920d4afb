import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.maximum(a, b)


def get_inputs():
    return [torch.randn(16, 1, 1024), torch.randn(1, 256, 1)]


def get_init_inputs():
    return []
