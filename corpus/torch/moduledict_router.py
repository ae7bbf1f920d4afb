"""An nn.ModuleDict of named branches chosen by a constructor argument and summed (the multi-branch/multi-head pattern), built from PyTorch's torch.nn (BSD-3), random weights."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, D = {"small": (4, 32), "full": (1024, 1024)}[SIZE]


class Model(nn.Module):
    def __init__(self, routes=("linear", "gated")):
        super().__init__()
        self.routes = list(routes)
        self.branches = nn.ModuleDict({
            "linear": nn.Linear(D, D),
            "gated": nn.Sequential(nn.Linear(D, D), nn.Sigmoid()),
            "conv": nn.Conv1d(1, 1, kernel_size=3, padding=1),
        })
        self.heads = nn.ModuleDict({"score": nn.Linear(D, 1), "logits": nn.Linear(D, 8)})

    def forward(self, x):
        h = x
        for name in self.routes:
            h = h + self.branches[name](x)
        h = torch.relu(h)
        return self.heads["logits"](h), self.heads["score"](h)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return [("linear", "gated")]
