"""Views read where they are, not copied first (issue 17).

A gated unit's `a, b = proj(x).chunk(2, -1)` was two contiguous copies of half the projection
before the kernel computing `tanh(a) * sigmoid(b)`; a transposed operand of an elementwise op
was copied too. Now tuple views become one slice or select per part (`drtriton/split_parts.py`),
a slice read by elementwise kernels is an index map onto its tensor (`policy/recompute.py`),
and any other view that reorders elements (a transpose, a permute) is read through its strides
(`PointwiseBlock.full`). Each case runs capture -> BuiltinPolicy -> the verifier under the
Triton interpreter, and the converted module at sizes other than the traced ones.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, check, first_candidate, source  # noqa: E402
from test_recompute import _load  # noqa: E402

GATED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 12)

    def forward(self, x):
        a, b = self.proj(x).chunk(2, dim=-1)
        return torch.tanh(a) * torch.sigmoid(b)


def get_inputs():
    return [torch.randn(2, 5, 8)]


def get_init_inputs():
    return []
'''


def test_tuple_views_become_one_view_per_part():
    src = source("(lambda a, b, c, d, e: (a * b, c + d, e * 2.0))(*x.chunk(2, -1), *x.split([1, 2], 1), "
                 "x.unbind(2)[3])", "torch.randn(2, 3, 6)")
    _, graph, _ = capture(src)
    targets = [n.target for n in graph.nodes]
    assert not any(t in targets for t in ("aten.chunk.default", "aten.split.Tensor", "aten.split_with_sizes.default",
                                          "aten.unbind.int"))
    slices = [n.args[1:] for n in graph.nodes if n.target == "aten.slice.Tensor"]
    assert [2, 0, 3] in slices and [2, 3, 6] in slices  # the chunk's halves
    assert [1, 0, 1] in slices and [1, 1, 3] in slices  # the split's parts
    assert [n.args[1:] for n in graph.nodes if n.target == "aten.select.int"] == [[2, 3]]  # the part read


def test_a_gated_unit_reads_the_halves_of_its_projection_in_place(cpu_verifier, tmp_path, monkeypatch):
    cand = check(cpu_verifier, GATED, ["linear"])
    assert ".chunk(" not in cand.source and ".contiguous()" not in cand.source, cand.source
    assert len(cand.plan) == 2, cand.plan  # the product, then the gate over both halves
    (tmp_path / "candidate.py").write_text(cand.source)
    (tmp_path / "problem.py").write_text(GATED)
    # (in a process of its own: the product's kernel calls tl.cdiv, which the interpreter
    # patches only where Triton was first imported under it)
    proc = subprocess.run([sys.executable, "-c", _OTHER_SIZES, str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["(3, 5, 8) equal", "(2, 9, 8) equal"], proc.stdout


_OTHER_SIZES = """
import importlib.util, sys, torch
def load(path):
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
ref = load(sys.argv[1] + "/problem.py").Model()
model = load(sys.argv[1] + "/candidate.py").ModelNew()
model.load_state_dict(ref.state_dict())
for shape in [(3, 5, 8), (2, 9, 8)]:  # another batch, another sequence length
    x = torch.randn(*shape)
    torch.testing.assert_close(model(x), ref(x))
    print(shape, "equal")
"""


@pytest.mark.parametrize("expr,inputs", [
    ("x.transpose(1, 2) * 2.0 + y", "torch.randn(2, 4, 3), torch.randn(2, 3, 4)"),
    ("torch.exp(x.permute(0, 2, 1)) - y[..., 1:]", "torch.randn(2, 4, 3), torch.randn(2, 3, 5)"),
    ("(lambda q, k: q * torch.sigmoid(k) + y)(*x.unbind(1))", "torch.randn(3, 2, 5), torch.randn(1)"),
], ids=["transpose", "permute_and_inner_slice", "unbind"])
def test_reordering_views_are_read_through_their_strides(cpu_verifier, tmp_path, monkeypatch, expr, inputs):
    src = source(expr, inputs, args="x, y")
    cand = check(cpu_verifier, src, [])
    forward = cand.source.split("def forward")[1].split("\nclass ")[0]
    copied = [line.split("=")[1].strip() for line in forward.splitlines() if ".contiguous()" in line]
    assert set(copied) <= {"x.contiguous()", "y.contiguous()"}, forward  # (forward's own: already contiguous)
    assert len(cand.plan) == 1, cand.plan
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    ns: dict = {}
    exec(src, ns)
    x, y = ns["get_inputs"]()
    x, y = torch.cat([x, x + 1.0]), y if y.numel() == 1 else torch.cat([y, y * 2.0])
    torch.testing.assert_close(model(x, y), ns["Model"]()(x, y))  # twice the batch


def test_a_view_of_the_wrong_size_is_refused_with_a_clear_error(tmp_path, monkeypatch):
    _, cand = first_candidate(source("x.transpose(1, 2) * y", "torch.randn(2, 4, 3), torch.randn(2, 3, 4)",
                                     args="x, y"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    with pytest.raises(ValueError, match="convert it again with inputs shaped as you call it"):
        model(torch.randn(2, 5, 3), torch.randn(2, 3, 4))


PARAMETER_HALVES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(16, 64))

    def forward(self, x):
        scale, shift = self.p.chunk(2, -1)
        return x * scale + shift


def get_inputs():
    return [torch.randn(4, 16, 32)]


def get_init_inputs():
    return []
'''


def test_a_parameter_read_through_a_slice_fixes_all_its_sizes(tmp_path, monkeypatch):
    # a parameter is never size-checked where a kernel reads it: a pick of it assumes every one
    # of its sizes, so a wider input must raise, not read past the parameter's end
    _, cand = first_candidate(PARAMETER_HALVES)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    ns: dict = {}
    exec(PARAMETER_HALVES, ns)
    model.load_state_dict(ns["Model"]().state_dict())
    x = torch.randn(2, 16, 32)
    torch.testing.assert_close(model(x), x * model.p[:, :32] + model.p[:, 32:])
    with pytest.raises(ValueError, match="convert it again with inputs shaped as you call it"):
        model(torch.randn(4, 32, 32))


def test_a_transposed_operand_with_a_size_one_dim_is_checked(tmp_path, monkeypatch):
    # read through its strides, it is indexed only along the dims it varies in: a size of 1
    # that grows at the call would repeat one column, so the call is refused instead
    _, cand = first_candidate(source("x.transpose(1, 2) + 1.0", "torch.randn(2, 8, 1)"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    x = torch.randn(3, 8, 1)
    torch.testing.assert_close(model(x), x.transpose(1, 2) + 1.0)
    with pytest.raises(ValueError, match="convert it again with inputs shaped as you call it"):
        model(torch.randn(2, 8, 3))


def test_a_small_output_read_from_a_large_tensor_can_take_64_bit_offsets():
    # the last position's row of a batch of sequences: the tensor read through its strides follows
    # the batch, so whether its offsets need 64 bits is decided at the call by its size too
    _, cand = first_candidate(source("x[:, -1, :] * 2.0", "torch.randn(2, 8, 6)"))
    assert "x.numel() > 2**30" in cand.source.split("def forward")[1], cand.source


def test_parts_of_two_tuple_views_get_names_of_their_own():
    # the second unbind is export's `unbind_1`, so the first's part 1 is `unbind_11`: the name
    # its part 11 would take too
    src = source("(lambda xs, hs: xs[1] + xs[11] + hs[0][:, :4])(x.unbind(1), y.unbind(0))",
                 "torch.randn(2, 12, 4), torch.randn(3, 2, 4)", args="x, y")
    _, graph, _ = capture(src)
    names = [n.name for n in graph.nodes]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("expr,inputs,tiles", [
    ("x + y.transpose(1, 2)", "torch.randn(2, 40, 24), torch.randn(2, 24, 40)", "1 and 2"),
    ("x + y.permute(0, 2, 3, 1)", "torch.randn(2, 5, 20, 24), torch.randn(2, 24, 5, 20)", "2 and 3"),  # NCHW beside NHWC
    ("x - y.permute(0, 3, 1, 2)", "torch.randn(2, 24, 5, 20), torch.randn(2, 5, 20, 24)", "1 and 3"),  # a dim between
    ("x * y.t()", "torch.randn(40, 24), torch.randn(24, 40)", "0 and 1"),
], ids=["transpose", "nchw-to-nhwc", "dim-between", "matrix"])
def test_a_transposed_operand_is_read_in_tiles_along_its_contiguous_dim(tmp_path, monkeypatch, expr, inputs, tiles):
    # (issue 17: a flat block read such an operand 32 rows apart per warp, at half the bandwidth)
    src = source(expr, inputs, args="x, y")
    _, cand = first_candidate(src)
    assert f"as tiles of dims {tiles}" in cand.source, cand.source
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    ns: dict = {}
    exec(src, ns)
    x, y = ns["get_inputs"]()
    if x.dim() > 2:  # three times the batch: a partial tile along neither dim, other rows
        x, y = torch.cat([x, x + 1.0, x * 3.0]), torch.cat([y, y * 2.0, y - 1.0])
    assert torch.equal(model(x, y), ns["Model"]()(x, y))


def test_tiles_need_an_operand_laid_out_along_another_dim():
    # operands contiguous along the last dim, or a transposed one that is a column (it changes
    # along one dim only): flat or rows as before
    for expr, inputs in (("x + y", "torch.randn(2, 40, 24), torch.randn(2, 40, 24)"),
                         ("x + y.transpose(1, 2)", "torch.randn(2, 40, 24), torch.randn(2, 1, 40)")):
        _, cand = first_candidate(source(expr, inputs, args="x, y"))
        assert "as tiles" not in cand.source and "add_kernel" in cand.source, (expr, cand.source)


def test_tiles_stay_within_the_grid():
    # 5,000,000 columns are 78,125 tiles of 64: more programs than a grid axis holds
    _, cand = first_candidate(source("x * y.t()", "torch.randn(16, 5_000_000), torch.randn(5_000_000, 16)",
                                     args="x, y"))
    assert "as tiles" not in cand.source and "mul_kernel" in cand.source
