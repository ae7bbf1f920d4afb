"""Inception v3 (Szegedy et al. 2015), without the auxiliary head; needs inputs of at least 75x75: torchvision.models.inception_v3(weights=None, num_classes=10) from torchvision (BSD-3), random weights."""

import torch
import torch.nn as nn
import torchvision

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, HW = {"small": (2, 80), "full": (16, 299)}[SIZE]
CLASSES = 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torchvision.models.inception_v3(weights=None, num_classes=CLASSES, aux_logits=False, init_weights=False, dropout=0.0)
        self.model.eval()

    def forward(self, x):
        return self.model(x)


def get_inputs():
    return [torch.randn(B, 3, HW, HW)]


def get_init_inputs():
    return []
