"""`torch.einsum` equations that are matrix products (KernelBench L1/11 "bijl,lk->bijk") are
captured as the vocabulary's matmul and converted to Triton (end to end on CPU under the Triton
interpreter); other equations are not taken for one: PyTorch's decomposition lowers them."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, check, first_candidate, source  # noqa: E402



@pytest.mark.parametrize("equation,inputs", [
    ("bijl,lk->bijk", "torch.randn(2, 3, 5, 16), torch.randn(16, 7)"),  # KernelBench L1/11
    ("bmk,bkn->bmn", "torch.randn(3, 9, 20), torch.randn(3, 20, 6)"),
    ("ik,kj->ij", "torch.randn(33, 40), torch.randn(40, 17)"),
    # contraction over the last axis of both: the second operand read transposed
    ("ik,jk->ij", "torch.randn(4, 5), torch.randn(6, 5)"),
    ("bhid,bhjd->bhij", "torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4)"),
])
def test_matrix_product_einsum_runs_in_triton(cpu_verifier, equation, inputs):
    cand = check(cpu_verifier, source(f"torch.einsum('{equation}', x, y)", inputs, args="x, y"), ["matmul"])
    assert "tl.dot" in cand.source


@pytest.mark.parametrize("equation,inputs", [
    ("ij->ji", "torch.randn(4, 5)"),  # a transpose
    ("ij,ij->i", "torch.randn(4, 5), torch.randn(4, 5)"),  # a row-wise dot
    ("bik,kj->bji", "torch.randn(2, 4, 5), torch.randn(5, 6)"),  # output axes permuted
])
def test_other_einsums_are_not_matmul(cpu_verifier, equation, inputs):
    args = "x, y" if "," in equation else "x"
    src = source(f"torch.einsum('{equation}', {args})", inputs, args=args)
    _, graph, _ = capture(src)
    # not the vocabulary's matmul: lowered by PyTorch's decomposition (views, bmm, mul, sum)
    assert not [n for n in graph.nodes if n.target == "aten.einsum.default" and n.op is not None]
    if equation == "ij->ji":  # a transpose: a view, nothing to compute
        assert [n.target for n in graph.nodes] == ["aten.permute.default"]
        return
    problem, cand = first_candidate(src, "mixed")
    assert cpu_verifier.verify(problem, cand.source, mode="mixed").correct
