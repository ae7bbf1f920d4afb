"""Index plumbing as in top-k routing and beam search: torch.index_select of rows, torch.gather of per-row positions, then a projection; written against PyTorch's public API (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, N, D, K = {"small": (2, 16, 32, 4), "full": (32, 1024, 512, 64)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, D)

    def forward(self, x, rows, positions):
        # x: (B, N, D); rows: (B,) permutation of the batch; positions: (B, K) indices into N
        x = torch.index_select(x, 0, rows)
        idx = positions.unsqueeze(-1).expand(-1, -1, x.size(-1))
        picked = torch.gather(x, 1, idx)
        return self.proj(picked)


def get_inputs():
    return [torch.randn(B, N, D), torch.randperm(B), torch.randint(0, N, (B, K))]


def get_init_inputs():
    return []
