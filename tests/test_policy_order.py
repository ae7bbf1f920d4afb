"""The order in which the built-in policy offers a fragment's variants: the search verifies the
first plan whole and refines only while its budget lasts, so the first guess is what most users
get. The GPU order is the one measured by benchmarks/plan_variants.py (docs/benchmarks.md)."""

from __future__ import annotations

import torch

from drtriton.capture import capture_module
from drtriton.policy.builtin import LIBRARY, PYTORCH, BuiltinPolicy, first_choices
from drtriton.problem import from_source

GEMM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        return torch.relu(self.fc(x) * 2.0)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
'''


def _plans(source: str, device: str, mode: str) -> list[str]:
    problem = from_source(source, name="order")
    ns: dict = {}
    exec(problem.source, ns)
    with torch.device("meta"):
        graph = capture_module(ns["Model"](), list(ns["get_inputs"]()))
    return [c.description for c in BuiltinPolicy(device).candidates(problem, graph, mode)]


def test_gemm_order():
    fused = "linear, mul_scalar, relu: Triton"
    # GPU: 3 tf32 passes first (faster than cuBLAS's fp32 GEMM), then cuBLAS + fused epilogue
    assert _plans(GEMM, "cuda", "strict")[:2] == [f"{fused} (precision=tf32x3)", f"{fused} (precision=ieee)"]
    assert _plans(GEMM, "cuda", "mixed")[:3] == [f"{fused} (precision=tf32x3)", "linear: PyTorch; mul_scalar, relu: Triton",
                                                 f"{fused} (precision=ieee)"]
    # CPU (the interpreter): exact fp32 first, the library last
    assert _plans(GEMM, "cpu", "mixed")[:3] == [f"{fused} (precision=ieee)", f"{fused} (precision=tf32x3)",
                                                "linear: PyTorch; mul_scalar, relu: Triton"]


def test_first_plan_keeps_something_in_triton():
    # a convolution with an epilogue: cuDNN + the epilogue in Triton
    assert first_choices({0: [LIBRARY, 1, 0], 1: [0]}) == {0: LIBRARY, 1: 0}
    # a lone convolution (plus views): cuDNN alone is no Triton plan, so the first template leads
    assert first_choices({0: [LIBRARY, 1, 0], 1: []}) == {0: 1, 1: PYTORCH}
    assert first_choices({0: []}) == {0: PYTORCH}
