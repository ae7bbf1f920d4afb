"""nn.GRU, 2 layers, bidirectional, in PyTorch's default sequence-first layout, returning the output sequence, from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
T, B, IN, HID = {"small": (8, 2, 16, 32), "full": (128, 32, 256, 512)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(IN, HID, num_layers=2, bidirectional=True)

    def forward(self, x):
        out, _ = self.gru(x)
        return out


def get_inputs():
    return [torch.randn(T, B, IN)]


def get_init_inputs():
    return []
