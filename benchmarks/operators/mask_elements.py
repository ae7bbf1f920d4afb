import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x[x > 0.5])


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return []
