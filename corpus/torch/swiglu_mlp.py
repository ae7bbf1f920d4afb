"""LLaMA feed-forward: w2(silu(w1(x)) * w3(x)) with bias-free linears (Meta's llama/model.py FeedForward), random weights."""

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D, HIDDEN = {"small": (2, 8, 32, 64), "full": (8, 512, 1024, 2816)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(D, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, D, bias=False)
        self.w3 = nn.Linear(D, HIDDEN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
