import torch
import torch.nn as nn


class Model(nn.Module):
    """Only the selected tokens go through a layer (masked-token heads, routed experts)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(256, 256)

    def forward(self, x, keep):
        y = x.clone()
        y[keep] = self.proj(x[keep])
        return y


def get_inputs():
    return [torch.randn(32, 512, 256), torch.rand(32, 512) > 0.7]


def get_init_inputs():
    return []
