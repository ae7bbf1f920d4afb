import torch
import torch.nn as nn


class Model(nn.Module):
    """Top-p sampling's sort: a vocabulary's probabilities in descending order, with their ids."""

    def forward(self, logits):
        probs, ids = torch.sort(torch.softmax(logits, dim=-1), dim=-1, descending=True)
        return probs.cumsum(-1), ids


def get_inputs():
    return [torch.randn(256, 32000)]


def get_init_inputs():
    return []
