"""A gated unit over one fused projection, as Phi-3's MLP and GLU variants write it: the
projection's output chunked into a gate and a value, `value * silu(gate)` (each half a strided
view of the projection: read in place, not copied first), then the down projection. 8192 tokens,
1024 features, 2816 hidden."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, D, HIDDEN = 8192, 1024, 2816


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Linear(D, 2 * HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, D, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(up * F.silu(gate))


def get_inputs():
    return [torch.randn(TOKENS, D)]


def get_init_inputs():
    return []
