"""nn.GRU (batch_first) returning the output sequence and the last hidden state, from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, IN, HID = {"small": (2, 8, 16, 32), "full": (32, 128, 256, 512)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(IN, HID, num_layers=1, batch_first=True)

    def forward(self, x):
        out, h = self.gru(x)
        return out, h


def get_inputs():
    return [torch.randn(B, T, IN)]


def get_init_inputs():
    return []
