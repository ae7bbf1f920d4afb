"""Elementwise control and scans as in losses and samplers: torch.where with a threshold, clamp, cumsum along the sequence (a cumulative-probability / top-p style mask), written against PyTorch's public API (BSD-3)."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, V = {"small": (4, 32), "full": (256, 32000)}[SIZE]


class Model(nn.Module):
    def __init__(self, threshold=0.9):
        super().__init__()
        self.threshold = threshold
        self.temperature = nn.Parameter(torch.tensor(0.7))

    def forward(self, logits):
        probs = torch.softmax(logits / self.temperature.clamp(min=0.1), dim=-1)
        cum = torch.cumsum(probs, dim=-1)
        keep = torch.where(cum <= self.threshold, probs, torch.zeros_like(probs))
        keep = keep.clamp(min=1e-6, max=1.0)
        return keep / keep.sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(B, V)]


def get_init_inputs():
    return [0.9]
