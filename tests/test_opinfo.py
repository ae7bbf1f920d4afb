"""The OpInfo measurement (benchmarks/opinfo.py) on a few operators, run as a user runs it: PyTorch's
own samples become one-operator problem files, those the vocabulary covers convert and verify in
strict mode, the others say why, and samples that cannot be a fair problem are left out with a
reason. (A subprocess: importing OpInfo's module freezes torch.backends flags for the process.)"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

opinfo = pytest.importorskip("opinfo")


def test_samples_become_problems_and_covered_operators_convert(tmp_path):
    pytest.importorskip("expecttest")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "opinfo.py"), "--only",
                        "add,rsqrt,special.airy_ai,where,nn.functional.relu,transpose,item", "--out", str(tmp_path / "opinfo.md"),
                        "--json", str(tmp_path / "cases.jsonl"), "--budget", "120"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    found = {c["name"]: c for c in map(json.loads, (tmp_path / "cases.jsonl").read_text().splitlines())}
    assert "torch.add(a0" in found["add"]["source"] and found["add"]["strict"] == "correct"
    assert found["nn.functional.relu"]["strict"] == "correct"
    assert found["rsqrt"]["strict"] == "correct"  # Core ATen math: a vocabulary operator
    assert "airy_ai" in found["special.airy_ai"]["strict"]  # not covered: the reason names it
    # OpInfo's lambda (it reorders the arguments) is written into the problem and called
    assert "_op = lambda self, condition, other, **kwargs: torch.where(condition, self, other" in found["where"]["source"]
    assert found["where"]["strict"] == "correct"
    assert found["item"]["left_out"] == "returns float"  # a lambda too, but a number out: no fair problem
    assert found["add"]["compiles"] == "yes"  # torch.compile (Inductor, CPU) compiles it: counted
    assert found["transpose"]["view"] and not found["transpose"]["strict"]  # a view: nothing to convert
    text = (tmp_path / "opinfo.md").read_text()
    assert "| `add` | correct |" in text and "Left out (1)" in text
    assert "the 5 problems that `torch.compile" in text and "View-only (1; outside the percentages): `transpose`" in text


def test_operators_are_called_as_functions_or_tensor_methods():
    assert opinfo.callable_expr("nn.functional.relu") == ("torch.nn.functional.relu", False)
    assert opinfo.callable_expr("add") == ("torch.add", False)
    assert opinfo.callable_expr("contiguous") == ("contiguous", True)  # only a Tensor method
    assert opinfo.callable_expr("no_such_op") is None


def test_opinfo_lambdas_are_written_out_as_opinfo_calls_them(tmp_path):
    """The lambda's text from its file (also when it spans lines), without OpInfo's seeding wrapper;
    None where it uses names a problem file lacks."""
    (tmp_path / "opinfo_like.py").write_text(
        "import torch\n"
        "def wrapper_set_seed(f, *args, **kwargs):\n    return f(*args, **kwargs)\n"
        "OPS = [\n"
        "    dict(op=lambda weight, idx, **kwargs: torch.nn.functional.embedding(idx, weight, **kwargs),\n"
        "         other=1),\n"
        "    dict(op=lambda *args, **kwargs:\n"
        "             wrapper_set_seed(torch.nn.functional.dropout, *args, **kwargs), x=2),\n"
        "    dict(op=lambda x: wrapper_set_seed.__name__ + str(x)),\n"
        "]\n")
    spec = importlib.util.spec_from_file_location("opinfo_like", tmp_path / "opinfo_like.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    embedding, dropout, other_names = (d["op"] for d in module.OPS)
    assert opinfo.lambda_source(embedding) == "lambda weight, idx, **kwargs: torch.nn.functional.embedding(idx, weight, **kwargs)"
    assert opinfo.lambda_source(dropout) == "lambda *args, **kwargs: torch.nn.functional.dropout(*args, **kwargs)"
    assert opinfo.lambda_source(other_names) is None


def test_view_only_operators_are_told_apart():
    view = opinfo._problem("transpose", True, _Sample(torch.randn(3, 4), (0, 1)))
    copy = opinfo._problem("torch.transpose_copy", False, _Sample(torch.randn(3, 4), (0, 1)))
    assert opinfo.check_reference(view) is True
    assert opinfo.check_reference(copy) is False


def test_operators_that_change_their_input_are_no_fair_problem():
    """In-place random fills (OpInfo's `cauchy`, `uniform`) return their input: not a view-only
    operator but one whose input changes (the check also survives NaN inputs left as they were)."""
    fill = opinfo._problem("uniform_", True, _Sample(torch.randn(3, 4), ()))
    with pytest.raises(ValueError, match="changes its input in place"):
        opinfo.check_reference(fill)
    nan = opinfo._problem("torch.nan_to_num", False, _Sample(torch.tensor([1.0, float("nan")]), ()))
    assert opinfo.check_reference(nan) is False


def test_compile_check_has_a_time_limit():
    src = opinfo._problem("torch.exp", False, _Sample(torch.randn(3), ()))
    checker = opinfo.CompileChecker(timeout=0.01)
    try:
        assert "did not finish" in checker.check(src)
    finally:
        checker.close()


class _Sample:
    def __init__(self, input, args, kwargs=None):
        self.input, self.args, self.kwargs = input, args, kwargs or {}


def test_pytorch_layers_become_problems_and_convert(tmp_path):
    """benchmarks/moduleinfo.py: ModuleInfo's layers, constructed as PyTorch's tests construct them,
    as problem files; a lazy layer (sized by its first forward) and an LSTM (nested outputs)
    convert strict; a layer built from another module instance is left out, saying why."""
    pytest.importorskip("expecttest")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "moduleinfo.py"), "--only",
                        "Linear,LazyConv1d,LSTM,TransformerEncoder", "--modes", "strict", "--out", str(tmp_path / "m.md"),
                        "--json", str(tmp_path / "cases.jsonl"), "--budget", "240"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    found = {c["name"]: c for c in map(json.loads, (tmp_path / "cases.jsonl").read_text().splitlines())}
    assert "self.layer = nn.Linear(" in found["Linear"]["source"] and found["Linear"]["strict"] == "correct"
    assert found["LazyConv1d"]["strict"] == "correct", found["LazyConv1d"]["strict"]
    assert found["LSTM"]["strict"] == "correct", found["LSTM"]["strict"]
    assert "TransformerEncoderLayer constructor argument" in found["TransformerEncoder"]["left_out"]
    text = (tmp_path / "m.md").read_text()
    assert "| strict | 3 | 100% |" in text and "| `LSTM` | correct |" in text


def test_another_opinfo_sample_is_picked_on_request():
    pytest.importorskip("expecttest")
    # in a child process: importing OpInfo's module freezes torch.backends flags for the process
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import opinfo\n"
            "from torch.testing._internal.common_methods_invocations import op_db\n"
            "op = next(o for o in op_db if o.name == 'cummax')\n"
            "first, last = opinfo.make_problem(op), opinfo.make_problem(op, -1)\n"
            "assert first != last and 'reshape(())' in last, last[:400]  # the last sample: a 0-d input\n")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "benchmarks")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
