import torch
import torch.nn as nn


class Model(nn.Module):
    """A detection head's post-processing: the confident rows' scores squashed in place."""

    def forward(self, x):
        y = x.clone()
        keep = x[..., 4] > 0.5
        y[keep] = torch.sigmoid(x[keep]) * 2.0
        return y


def get_inputs():
    return [torch.randn(16, 8400, 85)]


def get_init_inputs():
    return []
