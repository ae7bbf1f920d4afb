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
# (integer inputs, as the GPU's routers count, are CUDA only: tests/test_verifier_gpu.py)


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


def test_integer_bins_divide_exactly_as_cuda_computes_them():
    # CUDA's histc on integers (transformers' routers on the GPU count expert ids as int32):
    # min and max truncated to integers, (x - lo) * bins // (hi - lo) in int64, counts in x's
    # dtype. The CPU has no integer histc; on small integers float32's bins are the same numbers
    # (tests/gpu checks CUDA's own integer kernel)
    from drtriton.capture import store_lowerings

    histc = store_lowerings()[torch.ops.aten.histc.default]
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(-20, 60, (5000,), generator=gen, dtype=torch.int32)
    for bins, lo, hi in [(8, 0, 7), (60, 0, 0), (7, -3, 41), (5, 0.7, 9.9), (13, -2.5, 50)]:
        got = histc(x, bins, lo, hi)
        want = torch.histc(x.float(), bins, int(lo), int(hi)) if int(lo) != int(hi) else torch.histc(x.float(), bins)
        assert got.dtype == torch.int32 and torch.equal(got, want.to(torch.int32)), (bins, lo, hi)
    # min and max equal once truncated (0.2, 0.7 -> 0, 0): the range comes from the data
    assert torch.equal(histc(x, 9, 0.2, 0.7), torch.histc(x.float(), 9).to(torch.int32))


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
    assert "torch.ops.transformers" not in forward and "histc" not in forward, cand.plan
    assert any(line.startswith("grouped_mm") and "Triton" in line for line in cand.plan), cand.plan
    verdict = cpu_verifier.verify(from_source(MOE, name="moe"), cand.source, mode="strict")
    assert verdict.correct, verdict.summary
