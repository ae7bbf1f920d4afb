"""A residual added across a transpose, as sequence-mixing blocks write it (MLP-Mixer's token
mixing, a (batch, channels, length) convolution output added to a (batch, length, channels)
stream): `x + y.transpose(1, 2)`, the transposed operand read through its strides (no copy
first). 32 x 1024 x 512 floats each."""

import torch
import torch.nn as nn

B, L, C = 32, 1024, 512


class Model(nn.Module):
    def forward(self, x, y):
        return x + y.transpose(1, 2)


def get_inputs():
    return [torch.randn(B, L, C), torch.randn(B, C, L)]


def get_init_inputs():
    return []
