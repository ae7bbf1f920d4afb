"""Features joined along the last dim before a linear layer (a recommendation or fusion model's
tower): three embeddings of 256, 128 and 64 features for 65536 rows, the matrix product reading
the cat."""

import torch
import torch.nn as nn

ROWS = 65536


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(256 + 128 + 64, 256)

    def forward(self, a, b, c):
        return self.proj(torch.cat([a, b, c], -1))


def get_inputs():
    return [torch.randn(ROWS, 256), torch.randn(ROWS, 128), torch.randn(ROWS, 64)]


def get_init_inputs():
    return []
