"""Order statistics (drtriton/policy/emit/sort.py), end to end on the CPU: capture -> BuiltinPolicy
candidates (strict mode unless said) -> the first candidate verified by the Verifier under the
Triton interpreter, against PyTorch, at the inputs' batch and the verifier's second one. Draws
are continuous (no ties) where PyTorch leaves the order of ties open (sort without stable=True,
topk, kthvalue, median); ties, NaN and -0.0 where it does not (stable sorts)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_scatter import capture, check, source  # noqa: E402

from drtriton.policy.builtin import BuiltinPolicy  # noqa: E402
from drtriton.policy.emit import Names, Unsupported, sort  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402

X = "torch.randn(6, 10)"


@pytest.mark.parametrize("expr,label", [
    ("torch.sort(x, dim=-1)", "sort"),  # values and indices
    ("torch.sort(x, dim=1, descending=True)[0]", "sort"),
    ("torch.argsort(x, dim=-1)", "sort"),  # lowered to sort, its indices alone
    ("torch.sort(x, dim=0)", "sort"),  # along the batch: rows change length with it
])
def test_sort(cpu_verifier, expr, label):
    check(cpu_verifier, source(expr, X, "x"), [label])


def test_sort_of_a_middle_axis(cpu_verifier):
    """The axis is not the last: rows of R elements I apart, values and indices."""
    check(cpu_verifier, source("torch.sort(x, dim=1, descending=True)", "torch.randn(3, 7, 5)", "x"), ["sort"])


def test_stable_sort_with_ties_nan_and_signed_zeros(cpu_verifier):
    """stable=True: ties come out by index (descending too), NaN last ascending and first
    descending, -0.0 equal to 0.0, as PyTorch orders them."""
    x = ("torch.where(torch.rand(4, 33) < 0.1, float('nan'), "
         "torch.randint(-2, 3, (4, 33)).float() * torch.where(torch.rand(4, 33) < 0.5, 1.0, -1.0))")
    for descending in (False, True):
        check(cpu_verifier, source(f"torch.sort(x, dim=-1, descending={descending}, stable=True)", x, "x"), ["sort"])


def test_integer_sort(cpu_verifier):
    """int32 with its indices (distinct values: a permutation); int64 values alone."""
    check(cpu_verifier, source("torch.sort(x.int(), dim=-1, descending=True)",
                               "torch.randn(6, 10).mul(1000)", "x"), ["sort"])
    check(cpu_verifier, source("torch.sort(x, dim=-1)[0]", "torch.randint(-50, 50, (6, 10))", "x"), ["sort"])
    check(cpu_verifier, source("torch.sort(x, dim=0, descending=True)[0]", "torch.randint(-50, 50, (6, 10))", "x"),
          ["sort"])


@pytest.mark.parametrize("expr,label", [
    ("torch.topk(x, 3, dim=-1)", "topk"),
    ("torch.topk(x, 2, dim=0, largest=False)", "topk"),
    ("torch.kthvalue(x, 4, dim=1)", "kthvalue"),
    ("torch.kthvalue(x, 2, dim=1, keepdim=True)", "kthvalue"),
    ("torch.median(x, dim=-1)", "median"),  # 10 elements: the lower median, the 5th
    ("torch.median(x, dim=0, keepdim=True)", "median"),
    ("torch.median(x)", "median"),  # of all elements, a 0-d value
    ("torch.nanmedian(torch.where(x > 1.0, float('nan'), x), dim=1)", "nanmedian"),
    ("torch.median(torch.where(x > 1.5, float('nan'), x), dim=1)", "median"),  # a NaN: NaN at its index
    ("torch.nanmedian(x)", "nanmedian"),
])
def test_selections(cpu_verifier, expr, label):
    check(cpu_verifier, source(expr, X, "x"), [label])


def test_mode(cpu_verifier):
    """The most frequent value, the smallest of equally frequent ones; its index where a value
    repeats (PyTorch's CPU kernel: the last occurrence) and where none does."""
    check(cpu_verifier, source("torch.mode(x, 0, keepdim=True)[0]", "torch.randint(0, 3, (9, 5)).float()", "x"),
          ["mode"])
    check(cpu_verifier, source("torch.mode(x, 1)", "torch.tensor([[3., 1., 2., 1., 3., 2.], [5., 4., 3., 3., 5., 5.]])",
                               "x"), ["mode"], second=False)
    check(cpu_verifier, source("torch.mode(x, -1)", X, "x"), ["mode"])


def test_zero_d_inputs(cpu_verifier):
    """A 0-d input is one row of one element (OpInfo's median, quantile samples)."""
    for expr in ("torch.median(x)", "torch.sort(x)", "torch.kthvalue(x, 1)"):
        check(cpu_verifier, source(expr, "torch.randn(())", "x"), [expr.split("(")[0].split(".")[1]], second=False)


def test_quantile_in_strict_mode(cpu_verifier):
    """quantile lowers to a sort, gathers and arithmetic: with the sort in Triton, strict mode."""
    check(cpu_verifier, source("torch.quantile(x, 0.3, dim=1)", X, "x"), ["sort"])


ROUTER = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    \"\"\"A mixture-of-experts router: scores, softmax, the top 2 experts, their weights renormalised,
    each token's output the weighted sum of its experts' (stand-in) outputs gathered.\"\"\"

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 8, bias=False)
        self.experts = nn.Parameter(torch.randn(8, 16))

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1)
        weights, chosen = torch.topk(probs, 2, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        picked = self.experts[chosen]  # (tokens, 2, 16)
        return (weights.unsqueeze(-1) * picked).sum(dim=1), chosen


def get_inputs():
    return [torch.randn(12, 16)]


def get_init_inputs():
    return []
"""


def test_topk_in_a_moe_router(cpu_verifier):
    cand = check(cpu_verifier, ROUTER, ["topk"])
    assert not cand.pytorch_compute


def test_long_rows_fall_back_in_mixed_mode(cpu_verifier):
    """mode along a row longer than one program sorts (sort, topk and the other selections go in
    chunks): Unsupported in strict mode (said why); mixed mode keeps it in PyTorch and the rest in
    Triton."""
    src = source("torch.relu(torch.mode(x, dim=-1)[0])", "torch.randint(0, 9, (2, 5000)).float()", "x")
    problem, graph, _ = capture(src)
    program = Program(graph)
    frag = next(f for f in program.fragments(fuse=False) if f.kind == "sort")
    with pytest.raises(Unsupported, match="at most 512"):  # (4096 on the GPU)
        sort.emit(program, frag, {}, Names(), device="cpu")
    assert next(iter(BuiltinPolicy("cpu").candidates(problem, graph, "strict")), None) is None
    cand = check(cpu_verifier, src, ["relu"], mode="mixed", second=False)
    assert any(line.startswith("mode:") and "PyTorch" in line for line in cand.plan), cand.plan
    assert any("at most 512" in note for note in cand.notes), cand.notes


def test_int64_sorts_with_their_indices(cpu_verifier):
    """int64 values beside their indices (a mixture of experts' routing sorts its expert ids):
    keyed by rank. Values beyond int32's range, ties kept in index order (stable), descending,
    a row longer than one rank chunk, and the selections on top of the same keys."""
    x = "torch.randint(-3, 4, (5, 37)) * 3_000_000_000"
    for expr in ("torch.sort(x, dim=-1, stable=True)", "torch.sort(x, dim=0, descending=True, stable=True)",
                 "torch.argsort(x.view(-1), stable=True)", "torch.median(x, dim=1)[0]", "torch.mode(x, dim=1)[0]"):
        check(cpu_verifier, source(expr, x, "x"), [expr.split("(")[0].split(".")[1].replace("argsort", "sort")])


def test_int64_rows_whose_values_fit_in_int32_are_keyed_by_value(cpu_verifier):
    # expert ids (small int64) skip the R^2 ranks; each row decides alone: here rows 0 and 3 hold
    # values beyond int32 and go by rank, the others by value, in one launch
    x = ("torch.randint(-3, 4, (5, 37)) * torch.tensor([3_000_000_000, 1, 1, -3_000_000_000, 1])[:, None]")
    for expr in ("torch.sort(x, dim=-1, stable=True)", "torch.sort(x, dim=-1, descending=True, stable=True)",
                 "torch.argsort(x[1:3].reshape(-1), stable=True)"):
        check(cpu_verifier, source(expr, x, "x"), ["sort"])


LONG_ROWS = [
    # a vocabulary's logits sorted for top-p sampling (3 chunks a row, ties), descending
    ("torch.sort(x, dim=-1, descending=True, stable=True)", "torch.randint(-40, 40, (2, 1300)).float() / 8"),
    # a mixture of experts' ids for 550 tokens, top 2: int64 that fit in int32, keyed by value
    ("torch.argsort(x, stable=True)", "torch.randint(0, 8, (1100,))"),
    # top-k along a middle axis of a long row
    ("torch.topk(x, 50, dim=1)[0]", "torch.randn(1, 1100, 2)"),
    # int64 beyond int32: ranks counted over the whole row, chunk by chunk
    ("torch.sort(x, stable=True)[1]", "torch.randint(-3, 4, (1100,)) * 3_000_000_000"),
    # the selections: the one element whose place is the wanted position; the median of a whole
    # tensor, of a row with NaN (the first NaN), nanmedian past NaN; integers. (Which index PyTorch
    # gives among equal values, or among NaN in an all-NaN row, is its selection algorithm's: none here.)
    ("torch.kthvalue(x, 700, dim=1)", "torch.randn(3, 1300)"),
    ("torch.median(x)", "torch.randn(40, 30)"),
    ("torch.median(x, dim=-1, keepdim=True)", "torch.where(torch.rand(3, 1100) < 0.01, float('nan'), torch.randn(3, 1100))"),
    ("torch.nanmedian(x, dim=0)", "torch.where(torch.rand(1100, 3) < 0.3, float('nan'), torch.randn(1100, 3))"),
    ("torch.median(x, dim=1)[0]", "torch.randint(-3, 4, (2, 1100)) * 3_000_000_000"),
]


@pytest.mark.parametrize("expr,inputs", LONG_ROWS, ids=[c[0] for c in LONG_ROWS])
def test_rows_longer_than_one_program_sorts_go_in_chunks(cpu_verifier, expr, inputs):
    # (rows past 512 under the interpreter, past 4096 on the GPU; a second input configuration is not
    # drawn for integer ids the verifier takes for indices)
    cand = check(cpu_verifier, source(expr, inputs, "x"), [expr.split("(")[0].split(".")[1].replace("argsort", "sort")],
                 second="argsort" not in expr and "3_000" not in expr)
    assert "_place[" in cand.source, cand.plan  # each chunk sorted, then each element placed


def test_unsupported_dtypes_are_said():
    problem, graph, _ = capture(source("torch.sort(x, dim=-1)", "torch.randn(4, 6).double()", "x"))
    program = Program(graph)
    frag = next(f for f in program.fragments() if f.kind == "sort")
    with pytest.raises(Unsupported, match="torch.float64 sort"):
        sort.emit(program, frag, {}, Names(), device="cpu")


_CALL = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for args in eval(sys.argv[2]):
    try:
        print(repr(module.ModelNew()(*args)))
    except IndexError as e:
        print("IndexError:", e)
"""


@pytest.mark.parametrize("expr,captured,calls,said", [
    # k past the row: PyTorch's error rather than what an unwritten output holds (long rows and short)
    ("torch.kthvalue(x, 1100, dim=1)[0]", "torch.randn(2, 1100)", "[(torch.randn(2, 1000),)]",
     "IndexError: kthvalue(): selected number k out of range for dimension 1"),
    ("torch.kthvalue(x, 4, dim=1)[0]", "torch.randn(2, 6)", "[(torch.randn(2, 3),)]",
     "IndexError: kthvalue(): selected number k out of range for dimension 1"),
    # the median of no elements is NaN; along an empty dim, PyTorch's error
    ("torch.median(x)", "torch.randn(30, 40)", "[(torch.randn(0, 40),)]", "tensor(nan)"),
    ("torch.median(x, dim=1)[0]", "torch.randn(3, 700)", "[(torch.randn(3, 0),)]",
     "IndexError: median(): Expected reduction dim 1 to have non-zero size."),
])
def test_selections_outside_their_rows_say_what_pytorch_says(cpu_verifier, tmp_path, expr, captured, calls, said):
    cand = check(cpu_verifier, source(expr, captured, "x"), [expr.split("(")[0].split(".")[1]])
    (tmp_path / "candidate.py").write_text(cand.source)
    proc = subprocess.run([sys.executable, "-c", _CALL, str(tmp_path / "candidate.py"), calls], capture_output=True,
                          text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == said
