"""MobileNetV3-Large (Howard et al. 2019): torchvision.models.mobilenet_v3_large(weights=None, num_classes=10) from torchvision (BSD-3), random weights."""

import torch
import torch.nn as nn
import torchvision

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, HW = {"small": (2, 64), "full": (32, 224)}[SIZE]
CLASSES = 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torchvision.models.mobilenet_v3_large(weights=None, num_classes=CLASSES, dropout=0.0)
        self.model.eval()

    def forward(self, x):
        return self.model(x)


def get_inputs():
    return [torch.randn(B, 3, HW, HW)]


def get_init_inputs():
    return []
