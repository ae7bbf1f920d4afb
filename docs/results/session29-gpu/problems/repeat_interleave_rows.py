import torch
import torch.nn as nn


class Model(nn.Module):
    """Each row repeated a number of times read from the data (0 to 3)."""

    def forward(self, x):
        return torch.repeat_interleave(x, (x[:, 0].abs() * 1.5).long(), dim=0) * 2


def get_inputs():
    return [torch.randn(16384, 256)]


def get_init_inputs():
    return []
