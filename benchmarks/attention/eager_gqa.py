import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, HEADS, KV_HEADS, DIM = 4, 1024, 16, 4, 64


def repeat_kv(hidden_states, n_rep):
    batch, heads, slen, dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, heads, n_rep, slen, dim)
    return hidden_states.reshape(batch, heads * n_rep, slen, dim)


class Model(nn.Module):
    """transformers' eager_attention_forward on projected heads (B, H, T, D)."""

    def __init__(self):
        super().__init__()
        self.scaling = DIM ** -0.5

    def forward(self, q, k, v, mask):
        k = repeat_kv(k, HEADS // KV_HEADS)
        v = repeat_kv(v, HEADS // KV_HEADS)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=0.0, training=self.training)
        return torch.matmul(w, v).transpose(1, 2).contiguous()


def get_inputs():
    mask = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), 1)[None, None].expand(B, 1, T, T)
    return [torch.randn(B, HEADS, T, DIM), torch.randn(B, KV_HEADS, T, DIM), torch.randn(B, KV_HEADS, T, DIM),
            mask.contiguous()]


def get_init_inputs():
    return []
