"""torch.histc lowered to bins computed as PyTorch's kernels do and counts accumulated with
index_put (capture.store_lowerings; issue 16: Mixtral counts its tokens per expert with histc).
Each case runs capture -> BuiltinPolicy -> the Verifier under the Triton interpreter, in strict
mode: every operator in Triton."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import check, source  # noqa: E402

CASES = [
    # the range from the data (min == max), values outside none
    ("torch.histc(x, bins=10)", "torch.randn(257)"),
    # a given range: values outside it and at its ends
    ("torch.histc(x * 2.0, bins=7, min=-1, max=1.3)", "torch.randn(5, 40)"),
    # integer ids as floats, as Mixtral's router counts tokens per expert
    ("torch.histc(i.float(), bins=8, min=0, max=7)", "torch.randint(0, 8, (6, 2))"),
]


@pytest.mark.parametrize("expr,inputs", CASES, ids=[c[0] for c in CASES])
def test_histc_runs_in_triton_and_counts_as_pytorch(cpu_verifier, expr, inputs):
    args = "i" if expr.count("i.float") else "x"
    cand = check(cpu_verifier, source(expr, inputs, args), ["index_put"])
    assert "histc" not in cand.source.split("def forward", 1)[1], cand.plan


def test_the_lowering_matches_torch_histc_exactly_on_many_values():
    # the lowering itself, run by PyTorch: bins at the edges of float32 rounding included
    from drtriton.capture import store_lowerings

    histc = store_lowerings()[torch.ops.aten.histc.default]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200_000, generator=gen) * 0.7
    for bins, lo, hi in [(100, 0, 0), (7, -1.0, 1.3), (64, -0.5, 0.5), (3, 2.0, 2.0)]:
        want = torch.histc(x, bins, lo, hi)
        assert torch.equal(histc(x, bins, lo, hi), want), (bins, lo, hi)
    const = torch.full((9,), 0.25)  # one value: the range widened by one each way
    assert torch.equal(histc(const, 4), torch.histc(const, 4))


MOE = '''
import torch
import torch.nn as nn
from transformers.integrations import moe


class Model(nn.Module):
    """A mixture-of-experts layer as transformers 5 runs it in float32: rows sorted by expert,
    counted with histc, offsets from a cumsum, one grouped product (traced, transformers' own
    `grouped_mm_fallback` operator)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 8, 12))

    def forward(self, x, expert_ids):
        order = torch.argsort(expert_ids, stable=True)
        counts = torch.histc(expert_ids.float(), bins=4, min=0, max=3)
        offs = torch.cumsum(counts, dim=0).to(torch.int32)
        out = moe._grouped_mm(x[order], self.weight, offs=offs)
        return torch.zeros_like(out).index_copy(0, order, out)


def get_inputs():
    return [torch.randn(10, 8), torch.randint(0, 4, (10,))]


def get_init_inputs():
    return []
'''


def test_a_mixture_of_experts_grouped_product_runs_in_triton(cpu_verifier):
    pytest.importorskip("transformers.integrations.moe")
    from drtriton.problem import from_source
    from test_policy_pool_scan_loss import first_candidate

    _, cand = first_candidate(MOE)
    forward = cand.source.split("def forward", 1)[1]
    assert "grouped_mm" not in forward and "histc" not in forward, cand.plan
    verdict = cpu_verifier.verify(from_source(MOE, name="moe"), cand.source, mode="strict")
    assert verdict.correct, verdict.summary
