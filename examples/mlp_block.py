"""A small transformer-style MLP block: the example the README converts."""

import torch
import torch.nn as nn

HIDDEN = 256


class MLPBlock(nn.Module):
    def __init__(self, dim: int, hidden: int = HIDDEN):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.up(x))
        return self.norm(x + self.down(h))


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [128]
