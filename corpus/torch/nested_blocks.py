"""Nested custom blocks: a ConvBNAct block used inside a SqueezeExcite residual Bottleneck used inside a Stage (the MobileNet/EfficientNet layout), built from PyTorch's torch.nn (BSD-3), random weights, eval mode."""

import torch
import torch.nn as nn

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, C, HW, BLOCKS = {"small": (2, 8, 8, 2), "full": (16, 64, 56, 3)}[SIZE]


class ConvBNAct(nn.Module):
    def __init__(self, cin, cout, k=1, groups=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SqueezeExcite(nn.Module):
    def __init__(self, c, reduced):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, reduced, 1)
        self.fc2 = nn.Conv2d(reduced, c, 1)

    def forward(self, x):
        s = self.pool(x)
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s


class Bottleneck(nn.Module):
    def __init__(self, c, expand=4):
        super().__init__()
        hidden = c * expand
        self.expand = ConvBNAct(c, hidden, 1)
        self.depthwise = ConvBNAct(hidden, hidden, 3, groups=hidden)
        self.se = SqueezeExcite(hidden, max(1, c // 4))
        self.project = ConvBNAct(hidden, c, 1, act=False)

    def forward(self, x):
        return x + self.project(self.se(self.depthwise(self.expand(x))))


class Stage(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        self.blocks = nn.Sequential(*[Bottleneck(c) for _ in range(n)])

    def forward(self, x):
        return self.blocks(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = ConvBNAct(3, C, 3)
        self.stage = Stage(C, BLOCKS)
        self.eval()

    def forward(self, x):
        return self.stage(self.stem(x))


def get_inputs():
    return [torch.randn(B, 3, HW, HW)]


def get_init_inputs():
    return []
