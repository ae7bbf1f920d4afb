"""GPT-2 MLP: Linear(4x) + GELU(approximate="tanh") + Linear (nanoGPT's MLP block), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D = {"small": (2, 8, 32), "full": (16, 256, 768)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(D, 4 * D)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * D, D)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
