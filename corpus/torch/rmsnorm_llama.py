"""LLaMA-style RMSNorm written with torch.rsqrt (as in Meta's llama/model.py and transformers' LlamaRMSNorm), weights randomised."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D = {"small": (2, 8, 32), "full": (16, 512, 4096)}[SIZE]


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = RMSNorm(D)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
