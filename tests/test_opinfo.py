"""The OpInfo measurement (benchmarks/opinfo.py) on a few operators: PyTorch's own samples become
one-operator problem files, those the vocabulary covers convert and verify in strict mode, the
others say why, and samples that cannot be a fair problem are left out with a reason."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

opinfo = pytest.importorskip("opinfo")


def test_samples_become_problems_and_covered_operators_convert(cpu_verifier):
    found = {c.name: c for c in opinfo.cases({"add", "rsqrt", "where", "nn.functional.relu"}, None)}
    assert "def get_inputs" in found["add"].source and "torch.add(a0" in found["add"].source
    assert "lambda" in found["where"].left_out  # OpInfo reorders its arguments: not our call
    assert opinfo.convert(found["add"], cpu_verifier, "strict", 120) == "correct"
    assert opinfo.convert(found["nn.functional.relu"], cpu_verifier, "strict", 120) == "correct"
    assert "rsqrt" in opinfo.convert(found["rsqrt"], cpu_verifier, "strict", 60)  # not covered yet: says so
    text = opinfo.report(list(found.values()))
    assert "| `add` |" in text and "Left out (1)" in text


def test_a_tensor_method_is_called_as_a_method():
    assert opinfo.callable_expr("nn.functional.relu") == ("torch.nn.functional.relu", False)
    assert opinfo.callable_expr("add") == ("torch.add", False)
    assert opinfo.callable_expr("masked_fill") == ("torch.masked_fill", False)
    assert opinfo.callable_expr("contiguous") == ("contiguous", True)  # only a Tensor method
    assert opinfo.callable_expr("no_such_op") is None
