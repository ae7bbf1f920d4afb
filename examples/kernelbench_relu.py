import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies ReLU (KernelBench Level 1 problem 19, smaller)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 64
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
