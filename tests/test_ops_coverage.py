"""docs/vocabulary.md is generated from the vocabulary and KernelBench; it must be up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

from drtriton.ops import coverage

pytest.importorskip("torch")
DOC = Path(__file__).resolve().parents[1] / "docs" / "vocabulary.md"


@pytest.fixture(scope="module")
def problems():
    if not (coverage.DEFAULT_KERNELBENCH / "level1.jsonl").exists():
        pytest.skip("KernelBench data (../shared/data/kernelbench) not available")
    return coverage.kernelbench()


def test_doc_is_up_to_date(problems):
    assert DOC.read_text() == coverage.render(problems), (
        "regenerate: python -m drtriton.ops.coverage > docs/vocabulary.md")


def test_kernelbench_coverage(problems):
    assert not [p.name for p in problems if p.error]
    level1 = [p for p in problems if p.level == 1]
    level2 = [p for p in problems if p.level == 2]
    assert sum(p.covered for p in level1) >= 90 and sum(p.covered for p in level2) >= 95
    by_name = {p.name: p for p in problems}
    # the mapping tells scalar from tensor operands and reductions from elementwise max
    assert by_name["5_Matrix_scalar_multiplication"].ops == ["mul_scalar"]
    assert "minimum" in by_name["93_ConvTranspose2d_Add_Min_GELU_Multiply"].ops
    assert "min" in by_name["25_Conv2d_Min_Tanh_Tanh"].ops
    assert by_name["95_CrossEntropyLoss"].ops == ["cross_entropy"]
    assert "torch.tril" in by_name["15_Matmul_for_lower_triangular_matrices"].uncovered[0]
