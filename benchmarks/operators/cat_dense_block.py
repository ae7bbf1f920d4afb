"""A DenseNet block's concatenation: the block's input and twelve 32-channel feature maps joined
along channels, then pooled (a template reads the cat, so it is a kernel of its own), batch 32 at
28 x 28 as DenseNet-121's second block."""

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, GROWTH, BATCH, HW = 12, 32, 32, 28


class Model(nn.Module):
    def forward(self, *features):
        return F.avg_pool2d(torch.cat(features, 1), 2)


def get_inputs():
    return [torch.randn(BATCH, 128, HW, HW)] + [torch.randn(BATCH, GROWTH, HW, HW) for _ in range(LAYERS)]


def get_init_inputs():
    return []
