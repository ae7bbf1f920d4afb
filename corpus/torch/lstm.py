"""nn.LSTM (2 layers, batch_first) returning the output sequence, from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, IN, HID = {"small": (2, 8, 16, 32), "full": (32, 128, 256, 512)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(IN, HID, num_layers=2, batch_first=True, dropout=0.0)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


def get_inputs():
    return [torch.randn(B, T, IN)]


def get_init_inputs():
    return []
