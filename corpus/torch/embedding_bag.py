"""nn.EmbeddingBag (mode="mean") over flat indices with bag offsets, from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
BAGS, PER_BAG, VOCAB, D = {"small": (4, 5, 100, 16), "full": (256, 64, 100000, 256)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, D, mode="mean")

    def forward(self, indices, offsets):
        return self.bag(indices, offsets)


def get_inputs():
    indices = torch.randint(0, VOCAB, (BAGS * PER_BAG,))
    offsets = torch.arange(0, BAGS * PER_BAG, PER_BAG)
    return [indices, offsets]


def get_init_inputs():
    return []
