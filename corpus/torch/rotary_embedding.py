"""Rotary position embedding applied to queries and keys with rotate_half and torch.cat (GPT-NeoX / transformers' apply_rotary_pos_emb), precomputed cos/sin buffers."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, H, T, HD = {"small": (2, 2, 8, 16), "full": (16, 12, 512, 64)}[SIZE]


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, HD, 2).float() / HD))
        t = torch.arange(T).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None], persistent=False)

    def forward(self, q, k):
        cos, sin = self.cos_cached, self.sin_cached
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed


def get_inputs():
    return [torch.randn(B, H, T, HD), torch.randn(B, H, T, HD)]


def get_init_inputs():
    return []
