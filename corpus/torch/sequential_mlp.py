"""An nn.Sequential MLP classifier (Linear, LayerNorm, ReLU, Linear, Tanh, Linear, LogSoftmax), the textbook PyTorch (BSD-3) pattern, random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, IN, HID, OUT = {"small": (4, 32, 64, 10), "full": (512, 784, 1024, 10)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(IN, HID),
            nn.LayerNorm(HID),
            nn.ReLU(),
            nn.Linear(HID, HID),
            nn.Tanh(),
            nn.Linear(HID, OUT),
            nn.LogSoftmax(dim=-1),
        )

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(B, IN)]


def get_init_inputs():
    return []
