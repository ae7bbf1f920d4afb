"""The module the real-editor tests convert: small enough for the Triton interpreter on a CPU."""

import torch
import torch.nn as nn


class SmallBlock(nn.Module):
    """Linear then ReLU."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.rand(4, 8)]


def get_init_inputs():
    return [8]
