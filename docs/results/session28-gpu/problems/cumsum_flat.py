import torch
import torch.nn as nn


class Model(nn.Module):
    """A running total over a whole tensor read as one row (offsets, prefix sums of counts)."""

    def forward(self, x):
        return torch.cumsum(x.flatten(), 0) * 0.5


def get_inputs():
    return [torch.rand(4096, 4096)]


def get_init_inputs():
    return []
