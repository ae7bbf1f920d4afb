"""The order in which the built-in policy offers a fragment's variants: the search verifies the
first plan whole and refines only while its budget lasts, so the first guess is what most users
get. The GPU order is the one measured by benchmarks/plan_variants.py (docs/benchmarks.md)."""

from __future__ import annotations

import torch

from drtriton.capture import Node, capture_module
from drtriton.policy.builtin import LIBRARY, PYTORCH, BuiltinPolicy, first_choices
from drtriton.policy.program import Fragment, Program
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
    conv = Node("conv", "aten.conv2d.default", [], {}, ["c"], op="conv2d")
    relu = Node("relu", "aten.relu.default", [], {}, ["r"], op="relu")
    with_epilogue = Fragment([conv, relu], conv, "conv", epilogue=[relu])
    lone = Fragment([conv], conv, "conv")
    view = Fragment([Node("v", "aten.view.default", [], {}, ["v"])], None, "view")
    # a convolution with an epilogue: cuDNN + the epilogue in Triton
    assert first_choices([with_epilogue], {0: [LIBRARY, 1, 0]}) == {0: LIBRARY}
    # ... also when the pointwise work is a fragment of its own
    assert first_choices([lone, with_epilogue], {0: [LIBRARY, 1, 0], 1: [0]}) == {0: LIBRARY, 1: 0}
    # a lone convolution (plus views): cuDNN alone is no Triton plan, so the first template leads
    assert first_choices([lone, view], {0: [LIBRARY, 1, 0], 1: []}) == {0: 1, 1: PYTORCH}
    assert first_choices([view], {0: []}) == {0: PYTORCH}


CONV_CHAIN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bias = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = F.leaky_relu(x, 0.01)
        x = torch.sigmoid(x * 2.0)
        return x + self.bias


def get_inputs():
    return [torch.randn(2, 3, 10, 10)]


def get_init_inputs():
    return []
'''


def _fused_cut(src: str):
    """(problem, the CPU policy, its Program, the fused cut) for a module source."""
    problem = from_source(src, name="case")
    ns: dict = {}
    exec(problem.source, ns)
    with torch.device("meta"):
        graph = capture_module(ns["Model"](), list(ns["get_inputs"]()))
    program = Program(graph)
    policy = BuiltinPolicy("cpu")
    return problem, policy, program, policy.cuts(program)[0]


def test_library_anchor_epilogue_takes_the_pointwise_fragment_after_it(cpu_verifier):
    """conv + 5 pointwise ops: the fused cut is (conv + 4) and (add), since a fragment holds 5
    operators. With cuDNN running the conv (mixed mode), the epilogue has room: the add joins it,
    one Triton pass over the conv's output instead of two (L2/2, 7, 57 and others ran two); the
    module is correct."""
    problem, policy, program, frags = _fused_cut(CONV_CHAIN)
    assert [f.label for f in frags] == ["conv2d, relu, leaky_relu, mul_scalar, sigmoid", "add"], \
        [f.label for f in frags]
    cand = policy.assemble(problem, program, frags, lambda i, f: LIBRARY if f.kind == "conv" else 0, "mixed")
    assert cand.plan == ["conv2d: PyTorch", "relu, leaky_relu, mul_scalar, sigmoid, add: Triton"], cand.plan
    assert cand.source.count("@triton.jit") == 1
    v = cpu_verifier.verify(problem, cand.source, mode="mixed")
    assert v.correct, v.reasons


CONV_NORM = CONV_CHAIN.replace("self.bias = nn.Parameter(torch.randn(8, 1, 1))", "self.gn = nn.GroupNorm(2, 8)").replace(
    """        x = F.leaky_relu(x, 0.01)
        x = torch.sigmoid(x * 2.0)
        return x + self.bias""", """        return self.gn(x * 2.0)""")


def test_library_anchor_epilogue_becomes_the_next_norms_prologue(cpu_verifier):
    """conv, relu, mul | group_norm: with cuDNN running the conv, its epilogue is computed as
    the group norm reads its input (one Triton fragment, the conv's output read once for the
    statistics and once to write) instead of being written out and read back."""
    problem, policy, program, frags = _fused_cut(CONV_NORM)
    assert [f.label for f in frags] == ["conv2d, relu, mul_scalar", "group_norm"], [f.label for f in frags]
    cand = policy.assemble(problem, program, frags, lambda i, f: LIBRARY if f.kind == "conv" else 0, "mixed")
    assert cand.plan == ["conv2d: PyTorch", "relu, mul_scalar, group_norm: Triton"], cand.plan
    # the norm keeps its own variant choice: PyTorch for it leaves the epilogue a kernel of its own
    cand = policy.assemble(problem, program, frags, lambda i, f: LIBRARY if f.kind == "conv" else PYTORCH, "mixed")
    assert cand.plan == ["conv2d: PyTorch", "relu, mul_scalar: Triton", "group_norm: PyTorch"], cand.plan
    cand = policy.assemble(problem, program, frags, lambda i, f: LIBRARY if f.kind == "conv" else 0, "mixed")
    v = cpu_verifier.verify(problem, cand.source, mode="mixed")
    assert v.correct, v.reasons


def test_a_module_of_many_kernels_tunes_a_bounded_number_of_configurations():
    # each configuration is a compilation before the first call returns: a whole network's
    # kernels keep their first (best-guess) configurations, a small module keeps them all
    import ast

    from drtriton.policy.emit import MODULE_TUNING_CONFIGS, autotune, bound_tuning

    def kernel(i: int, configs: int) -> str:
        tiles = [{"BLOCK": 2 ** (6 + c), "num_warps": 4} for c in range(configs)]
        return "\n".join(autotune(tiles, ["n"], "cuda") + [
            "@triton.jit", f"def k{i}(x_ptr, n, BLOCK: tl.constexpr):", "    pass"])

    small = [kernel(i, 4) for i in range(3)]
    assert bound_tuning(small) == small
    many = [kernel(i, 6) for i in range(20)] + ["@triton.jit\ndef plain(x_ptr):\n    pass"]
    trimmed = bound_tuning(many)
    counts = [k.count("triton.Config(") for k in trimmed]
    assert sum(counts) <= MODULE_TUNING_CONFIGS and counts[:20] == [MODULE_TUNING_CONFIGS // 20] * 20
    assert "'BLOCK': 64" in trimmed[0].replace('"', "'")  # the first configurations stay
    for k in trimmed:
        ast.parse(k)
    huge = bound_tuning([kernel(i, 3) for i in range(100)])
    assert all(k.count("triton.Config(") == 1 for k in huge)  # at least one each
