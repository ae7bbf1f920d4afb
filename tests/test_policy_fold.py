"""Sums over a linear operator's output folded into its operands (drtriton/policy/fold.py): the
rewritten graph has no GEMM or convolution left, and the converted module verifies (CPU,
interpreter, small shapes of KernelBench L2/14, L2/18 and L2/42)."""

from __future__ import annotations

import torch

from drtriton.capture import capture_module
from drtriton.policy.fold import fold_linear_reductions
from drtriton.problem import from_source
from drtriton.search import Search, SearchConfig

HEAD = "import torch\nimport torch.nn as nn\n\n"


def _model(forward: str, init: str = "self.linear = nn.Linear(40, 48)", inputs: str = "torch.randn(16, 40)") -> str:
    return HEAD + f'''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        {forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


GEMM_DIVIDE_SUM = _model("""x = torch.matmul(x, self.weight.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        return x * 1.5""", init="self.weight = nn.Parameter(torch.randn(48, 40))")

LINEAR_SUM_MAX = _model("""x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        return torch.logsumexp(x, dim=1, keepdim=True)""")

CONV_TRANSPOSE_MEAN = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(4, 6, 3, stride=2)
        self.bias = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        x = x + self.bias
        return torch.logsumexp(x, dim=1, keepdim=True) * 10.0


def get_inputs():
    return [torch.randn(2, 4, 9, 7)]


def get_init_inputs():
    return []
'''

# padding crops the border of a transposed convolution: not every product is in the output
CONV_TRANSPOSE_PADDED_MEAN = CONV_TRANSPOSE_MEAN.replace("stride=2)", "stride=2, padding=1)")


def _graph(source: str):
    ns: dict = {}
    exec(source, ns)
    torch.manual_seed(0)
    return capture_module(ns["Model"](), list(ns["get_inputs"]()))


def _ops(graph) -> list:
    return [n.op or n.target for n in graph.nodes]


def test_a_gemm_summed_over_its_features_becomes_a_matrix_vector_product():
    graph = _graph(GEMM_DIVIDE_SUM)
    folded, notes = fold_linear_reductions(graph)
    assert notes == ["the sum over matmul's output folded into its operands"]
    assert "matmul" not in _ops(folded) and "matmul" in _ops(graph)
    # the division moved after the (now much smaller) sum; the outputs keep their names
    assert _ops(folded)[-3:] == ["sum", "div_scalar", "mul_scalar"]
    assert folded.outputs == graph.outputs
    assert folded.values[folded.outputs[0]].shape == [16, 1]


def test_folds_need_every_product_in_the_output_and_a_single_use():
    graph = _graph(CONV_TRANSPOSE_PADDED_MEAN)
    assert fold_linear_reductions(graph) == (graph, [])
    reused = LINEAR_SUM_MAX.replace("x = torch.sum(x, dim=1, keepdim=True)",
                                    "x = torch.sum(x, dim=1, keepdim=True) + x")
    graph = _graph(reused)
    assert fold_linear_reductions(graph) == (graph, [])


def _convert(verifier, source: str, mode: str):
    search = Search(from_source(source, name="fold"), verifier, SearchConfig(mode=mode, budget_s=240))
    events = list(search.run())
    return search.result, events


def test_folded_programs_convert_and_verify(cpu_verifier):
    for source, gone in ((GEMM_DIVIDE_SUM, "matmul"), (LINEAR_SUM_MAX, "linear"),
                         (CONV_TRANSPOSE_MEAN, "conv_transpose2d")):
        result, events = _convert(cpu_verifier, source, "strict")
        assert result.correct, (result.reason, [(a.fragment, a.verdict.reasons[:1]) for a in result.attempts])
        assert any("rewrote: the" in e.data.get("message", "") for e in events if e.kind == "status")
        assert gone not in result.plan, result.plan
        assert "Rewritten first: the" in result.source  # the module says why its plan has no GEMM


def test_fold_guards_and_placement():
    # einsum maps to matmul in the vocabulary, but its first argument is the equation: no fold
    einsum = _model("return torch.einsum('ik,jk->ij', x, self.w).sum(dim=-1)",
                    init="self.w = nn.Parameter(torch.randn(48, 40))")
    graph = _graph(einsum)
    assert fold_linear_reductions(graph) == (graph, [])
    # a reduction nothing reads does not stop the fold of the one that matters
    dead = _model("unused = x.mean(dim=-1)\n        return self.linear(x).sum(dim=-1)")
    folded, notes = fold_linear_reductions(_graph(dead))
    assert len(notes) == 1 and "linear" not in _ops(folded)
    # an unbatched transposed convolution's dim 0 is a channel, not the batch
    unbatched = _model("return self.ct(x).sum(dim=-1)", init="self.ct = nn.ConvTranspose1d(4, 6, 3)",
                       inputs="torch.randn(4, 9)")
    graph = _graph(unbatched)
    assert fold_linear_reductions(graph) == (graph, [])
    # the folded nodes stand where the linear operator stood: before what came between it and
    # the reduction (which may change its operands in place)
    between = _model("y = self.linear(x)\n        u = torch.relu(x)\n        return y.sum(dim=-1) + u.sum(dim=-1)")
    folded, notes = fold_linear_reductions(_graph(between))
    names = [n.name for n in folded.nodes]
    assert notes and names.index("relu") > max(i for i, n in enumerate(names) if "_fold" in n)
