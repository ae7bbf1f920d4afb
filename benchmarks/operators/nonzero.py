import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 1.0)


def get_inputs():
    return [torch.randn(2048, 1024)]


def get_init_inputs():
    return []
