import torch
import torch.nn as nn


class Model(nn.Module):
    """A branch on the data: the verifier's inputs take both ways."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return []
