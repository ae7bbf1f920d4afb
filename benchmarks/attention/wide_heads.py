import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, HEADS, KV_HEADS, DIM = 8, 256, 8, 2, 256


def repeat_kv(hidden_states, n_rep):
    batch, heads, slen, dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, heads, n_rep, slen, dim)
    return hidden_states.reshape(batch, heads * n_rep, slen, dim)


class Model(nn.Module):
    """Gemma's eager attention: heads of 256 (Gemma 2B/7B's head_dim), grouped-query."""

    def __init__(self):
        super().__init__()
        self.scaling = DIM ** -0.5

    def forward(self, q, k, v, mask):
        k = repeat_kv(k, HEADS // KV_HEADS)
        v = repeat_kv(v, HEADS // KV_HEADS)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(w, v)


def get_inputs():
    mask = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), 1)[None, None].expand(B, 1, T, T)
    return [torch.randn(B, HEADS, T, DIM), torch.randn(B, KV_HEADS, T, DIM), torch.randn(B, KV_HEADS, T, DIM),
            mask.contiguous()]


def get_init_inputs():
    return []
