"""nn.RNN (Elman, tanh nonlinearity, batch_first) with an initial hidden state, from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, IN, HID = {"small": (2, 8, 16, 32), "full": (32, 256, 256, 512)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(IN, HID, num_layers=1, nonlinearity="tanh", batch_first=True)

    def forward(self, x, h0):
        out, _ = self.rnn(x, h0)
        return out


def get_inputs():
    return [torch.randn(B, T, IN), torch.randn(1, B, HID)]


def get_init_inputs():
    return []
