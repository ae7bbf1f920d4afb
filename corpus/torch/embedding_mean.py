"""nn.Embedding lookup followed by mean pooling over the sequence and a linear head (a bag-of-words classifier), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, VOCAB, D, CLASSES = {"small": (2, 8, 100, 32, 4), "full": (32, 512, 32000, 512, 16)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, ids):
        return self.head(self.embed(ids).mean(dim=1))


def get_inputs():
    return [torch.randint(0, VOCAB, (B, T))]


def get_init_inputs():
    return []
