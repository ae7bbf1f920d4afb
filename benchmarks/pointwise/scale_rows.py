import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, s):
        return x * s


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(8192, 1)]


def get_init_inputs():
    return []
