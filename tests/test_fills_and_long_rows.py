"""Constant fills computed where they are read, pointwise nodes joining an earlier producer's
kernel, and the rows template's tile along long rows (issue 17, session 33).

- `where(c, x, zeros_like(x))`, `full_like(x, -inf)`, `x.new_ones(...)`: the fill is its number
  inside the kernel reading it (Inductor's `full` lowering), never a tensor forward allocates and
  fills; `zeros_like(x)` reads x's sizes alone, so other batch sizes still run.
- A pointwise node whose latest producer's fragment cannot take it joins an earlier one that can:
  `where(cumsum(x) <= t, x, 0)` runs in the scan's kernel.
- Long contiguous rows take a wider tile and more warps (`rows.row_tile`).

Each case runs capture -> BuiltinPolicy -> the Verifier under the Triton interpreter.
"""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import check, first_candidate, source  # noqa: E402

from drtriton.policy.emit import rows  # noqa: E402


def _forward(src: str) -> str:
    return src.split("def forward", 1)[1].split("\nclass ", 1)[0]


FILLS = [
    ("torch.where(x > 0, x, torch.zeros_like(x))", "torch.randn(3, 5, 7)", "x"),
    ("torch.where(x > 1.0, torch.full_like(x, float('-inf')), x).softmax(-1)", "torch.randn(3, 5, 7)", "x"),
    ("x * x.new_ones(7) + torch.full((5, 7), 2.5)", "torch.randn(3, 5, 7)", "x"),
    ("(torch.ones_like(x, dtype=torch.bool) & (x > 0)).float() * x", "torch.randn(3, 5, 7)", "x"),
    ("torch.zeros_like(i) + i * 3 - torch.ones_like(i)", "torch.randint(-9, 9, (3, 4))", "i"),
    ("x.double() * torch.full_like(x, 0.1, dtype=torch.float64)", "torch.randn(3, 5, 7)", "x"),
    ("torch.full_like(i, 2**40) + i", "torch.randint(-9, 9, (3, 4))", "i"),  # beyond int32
    ("1.0 / (torch.full_like(x, -0.0) * x)", "torch.rand(3, 5) + 1.0", "x"),  # -inf, not +inf
    # the template is made after the fragment the add would join: forward makes it first
    ("x * 2.0 + torch.zeros_like(torch.softmax(x, -1))", "torch.randn(3, 5)", "x"),
]


@pytest.mark.parametrize("expr,inputs,args", FILLS, ids=[c[0] for c in FILLS])
def test_a_fill_read_elementwise_is_its_number_in_the_kernel(cpu_verifier, expr, inputs, args):
    src = source(expr, inputs, args)
    cand = check(cpu_verifier, src, [])
    forward = _forward(cand.source)
    for alloc in ("zeros_like", "ones_like", "full_like", "new_ones", "aten.full", "torch.full"):
        assert alloc not in forward, (alloc, forward)
    assert all("Triton" in line for line in cand.plan), cand.plan


def test_a_fill_stays_a_tensor_where_a_reader_cannot_compute_it():
    # the fill is the output itself, and a matrix product reads it: both need it stored
    src = source("(torch.zeros_like(x), x @ torch.ones_like(x).transpose(-1, -2))", "torch.randn(2, 4, 4)")
    _, cand = first_candidate(src)
    forward = _forward(cand.source)
    assert "zeros_like" in forward and "ones_like" in forward, forward


def test_a_pointwise_node_joins_the_scan_that_can_take_it(cpu_verifier):
    # where's inputs: le (from the scan's fragment) and x (the module's input); zeros_like: a fill
    src = source("torch.where(torch.cumsum(x, -1) <= 0.5, x, torch.zeros_like(x)).clamp(min=1e-3)",
                 "torch.rand(3, 40)")
    cand = check(cpu_verifier, src, ["cumsum"])
    scan = [line for line in cand.plan if "cumsum" in line]
    assert len(scan) == 1 and "where" in scan[0] and "clamp" in scan[0], cand.plan
    assert len(cand.plan) == 1, cand.plan


def test_the_tile_along_contiguous_rows_grows_with_their_length():
    assert rows.row_tile(1000, 1) == (1024, 1, 4)
    assert rows.row_tile(5000, 1) == (2048, 1, 8)
    assert rows.row_tile(32000, 1) == (4096, 1, 16)
    assert rows.row_tile(32000, 1, softmax=True) == (8192, 1, 16)
    assert rows.row_tile(5000, 1, softmax=True) == (2048, 1, 4)
    assert rows.row_tile(32000, 8)[2] == 4  # across columns: unchanged


LONG_ROWS = [
    ("torch.softmax(x, -1)", "torch.randn(2, 20000)", "BLOCK_R=8192, BLOCK_I=_BI, num_warps=16"),
    ("torch.log_softmax(x * 0.5, -1)", "torch.randn(3, 5000)", "BLOCK_R=2048, BLOCK_I=_BI, num_warps=4"),
    ("x.sum(-1) + x.amax(-1)", "torch.randn(4, 5000)", "BLOCK_R=2048, BLOCK_I=_BI, num_warps=8"),
    # four long rows: split into chunks of (1024, 4) tiles, which give the parallelism instead
    ("(x * x).mean(-1, keepdim=True)", "torch.randn(4, 17000)", "BLOCK_R=1024, BLOCK_I=_BI, num_warps=4"),
]


@pytest.mark.parametrize("expr,inputs,launch", LONG_ROWS, ids=[c[0] for c in LONG_ROWS])
def test_long_rows_take_the_wide_tile_and_stay_correct(cpu_verifier, expr, inputs, launch):
    cand = check(cpu_verifier, source(expr, inputs), [])
    assert launch in _forward(cand.source), _forward(cand.source)


def test_many_long_rows_take_the_widest_tile():
    _, cand = first_candidate(source("(x * x).mean(-1, keepdim=True)", "torch.randn(256, 17000)"))
    forward = _forward(cand.source)
    assert "BLOCK_R=4096, BLOCK_I=_BI, num_warps=16" in forward and "_SPLIT" not in forward, forward
