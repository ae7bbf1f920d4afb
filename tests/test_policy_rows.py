"""The built-in policy's reductions (drtriton/policy/emit/rows.py): the split (two-stage)
reduction taken when the output gives too few programs to fill a GPU and R is long, end to end
on CPU (capture -> BuiltinPolicy -> the Verifier under the Triton interpreter), and the cases
that keep the one-pass kernel. Shapes are the smallest that split (rows.SPLIT_BELOW,
rows.MIN_CHUNKS, rows.CHUNK_TILES) into several chunks, with a last chunk cut short."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_policy_pool_scan_loss import check, first_candidate, source  # noqa: E402

from drtriton.policy.emit import rows  # noqa: E402

SPLIT = "split over R in two stages"
HINGE_INPUTS = "torch.randn(64, 1024), torch.randint(0, 2, (1024,)).float() * 2 - 1"

SPLITS = [
    ("torch.sum(x)", "torch.randn(64, 1024)", "sum"),  # (O, R, I) = (1, 65536, 1)
    ("torch.mean(x, dim=(1, 2))", "torch.randn(3, 50, 401)", "mean"),  # O = 3, R not a multiple of a chunk
    ("torch.amax(x)", "torch.randn(41, 500)", "max"),
    ("torch.sum(x, dim=0)", "torch.randn(2000, 70)", "sum"),  # I = 70: two strips, the second masked
    ("torch.amin(x, dim=0) * 2.0 + 1.0", "torch.randn(3000, 5)", "min, mul_scalar, add_scalar"),  # epilogue
    ("torch.norm(x)", "torch.randn(64, 1024)", "norm"),
    ("torch.linalg.vector_norm(x, ord=1)", "torch.randn(64, 1024)", "norm"),
    ("torch.prod(x, dim=0)", "torch.rand(2048, 3) * 0.02 + 0.99", "prod"),
    # HingeLoss (KernelBench 100) spelled with the operators strict mode has: one fused chain,
    # the target broadcast along the last axis
    ("torch.mean(torch.clamp(x * y * -1.0 + 1.0, min=0))", HINGE_INPUTS, "mul, mul_scalar, add_scalar, clamp, mean"),
]


@pytest.mark.parametrize("expr,inputs,label", SPLITS, ids=[s[0] for s in SPLITS])
def test_split_reduction(cpu_verifier, expr, inputs, label):
    args = "x, y" if inputs.count("torch.") > 1 else "x"
    cand = check(cpu_verifier, source(expr, inputs, args=args), [label])
    assert len(cand.plan) == 1, cand.plan
    assert SPLIT in cand.source and "stage 2 of 2" in cand.source
    assert "atomic" not in cand.source


def test_hinge_loss_mixed(cpu_verifier):
    """KernelBench 100 as written: `1 - p * t` has no template (rsub), the clamp and the mean
    run fused in Triton, split."""
    cand = check(cpu_verifier, source("torch.mean(torch.clamp(1 - x * y, min=0))", HINGE_INPUTS, args="x, y"),
                 ["clamp, mean"], mode="mixed")
    assert SPLIT in cand.source


@pytest.mark.parametrize("expr,inputs", [
    ("torch.sum(x, dim=1)", f"torch.randn({rows.SPLIT_BELOW}, 20000)"),  # enough programs already
    ("torch.sum(x)", "torch.randn(8, 1000)"),  # R too short to be worth a second launch
    ("torch.argmax(x, dim=0)", "torch.randn(20000, 2)"),  # indices: one pass
    ("torch.logsumexp(x, dim=(0, 1))", "torch.randn(64, 1024)"),  # a (max, sum) pair: one pass
])
def test_one_pass_kept(expr, inputs):
    _, cand = first_candidate(source(expr, inputs))
    assert SPLIT not in cand.source and "stage 1" not in cand.source
