"""nn.EmbeddingBag(mode="max", padding_idx=0) over a (batch, length) id matrix (fixed-length bags,
padded with id 0), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

VOCAB, D, B, L = 50_000, 64, 2048, 50


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, D, mode="max", padding_idx=0)

    def forward(self, ids):
        return self.bag(ids)


def get_inputs():
    ids = torch.randint(1, VOCAB, (B, L))
    return [ids.masked_fill(torch.rand(B, L) < 0.3, 0)]  # about 30% padding


def get_init_inputs():
    return []
