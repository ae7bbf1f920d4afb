"""nn.EmbeddingBag(mode="sum") with per-sample weights over bags of about 20 ids (a recommender's
sparse features, as in DLRM), from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

VOCAB, D, BAGS, IDS = 1_000_000, 128, 4096, 4096 * 20


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, D, mode="sum")

    def forward(self, ids, offsets, weights):
        return self.bag(ids, offsets, per_sample_weights=weights)


def get_inputs():
    # bags of about 20 ids on average (some empty): each bag's start, sorted, the first at 0
    starts = torch.randint(0, IDS, (BAGS - 1,)).sort().values
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), starts])
    return [torch.randint(0, VOCAB, (IDS,)), offsets, torch.rand(IDS)]


def get_init_inputs():
    return []
