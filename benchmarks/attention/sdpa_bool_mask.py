import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, HEADS, KV_HEADS, DIM = 8, 512, 16, 4, 64


class Model(nn.Module):
    """F.scaled_dot_product_attention with a boolean padding mask, an explicit scale and grouped
    key/value heads, as transformers' sdpa path calls it."""

    def forward(self, q, k, v, keep):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=DIM ** -0.5, enable_gqa=True)


def get_inputs():
    keep = torch.arange(T)[None, :] < torch.randint(T // 2, T + 1, (B, 1))
    return [torch.randn(B, HEADS, T, DIM), torch.randn(B, KV_HEADS, T, DIM), torch.randn(B, KV_HEADS, T, DIM),
            keep[:, None, None, :]]


def get_init_inputs():
    return []
