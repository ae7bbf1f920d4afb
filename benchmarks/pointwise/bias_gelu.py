import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, b):
        return torch.nn.functional.gelu(x + b, approximate="tanh")


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096)]


def get_init_inputs():
    return []
