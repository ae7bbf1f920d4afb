"""A gated residual block written with `import torch as th` and `th.` everywhere (the style of OpenAI's guided-diffusion and improved-diffusion code), random weights."""

import torch as th
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D = {"small": (2, 8, 32), "full": (16, 256, 512)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, 2 * D)
        self.out = nn.Linear(D, D)
        self.scale = nn.Parameter(th.ones(D) * 0.5)

    def forward(self, x):
        a, b = th.chunk(self.proj(x), 2, dim=-1)
        h = th.tanh(a) * th.sigmoid(b)
        h = self.out(h) * self.scale
        return th.cat([x + h, th.abs(h)], dim=-1)


def get_inputs():
    return [th.randn(B, T, D)]


def get_init_inputs():
    return []
