import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, b):
        return x + b


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(4096)]


def get_init_inputs():
    return []
