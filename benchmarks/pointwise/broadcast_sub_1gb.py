import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a - b


def get_inputs():
    return [torch.randn(64, 1, 4096), torch.randn(1, 1024, 1)]


def get_init_inputs():
    return []
