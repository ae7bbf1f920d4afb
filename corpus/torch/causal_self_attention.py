"""nanoGPT-style CausalSelfAttention with an explicit masked_fill causal mask and softmax (Karpathy's nanoGPT model.py, slow path), random weights."""

import math
import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, D, H = {"small": (2, 8, 32, 4), "full": (16, 256, 768, 12)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)
        self.n_head = H
        self.n_embd = D
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B_, T_, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B_, T_, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B_, T_, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B_, T_, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T_, :T_] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B_, T_, C)
        return self.c_proj(y)


def get_inputs():
    return [torch.randn(B, T, D)]


def get_init_inputs():
    return []
