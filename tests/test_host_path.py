"""What a generated forward does on the host each call (issue 17): sizes go to `torch.empty` one
by one (a torch.Size argument costs 1-2 us more), a broadcast's output shape comes from its
operands' own sizes (`torch.broadcast_shapes` costs 13 us on CPU), and broadcast operands go to
the kernel with their own strides after a check of their shape (`expand` did both, for 1-2 us
an operand); so do the index tensors of advanced indexing. Checked on CPU: the modules verify under the Triton interpreter,
and a wrongly shaped operand raises a clear error instead of reading out of bounds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import check, source  # noqa: E402

from drtriton.policy.emit import empty  # noqa: E402


@pytest.mark.parametrize("shape,rank,sizes", [
    ("x.shape", 2, "*x.shape"),
    ("_xs", 3, "*_xs"),
    ("(*_xs[:-1], _N)", 2, "*_xs[:-1], _N"),
    ("(_B, _T, 2 * _H)", 3, "_B, _T, 2 * _H"),
    ("(x.shape[0],)", 1, "x.shape[0]"),
    ("()", 0, "()"),
    ("_xs[:-1]", 0, "()"),  # a 0-d result: torch.empty() takes no sizes at all
    ("(*_xs[:0], *_xs[1:])", 0, "()"),
])
def test_sizes_go_to_torch_empty_one_by_one(shape, rank, sizes):
    assert empty(shape, rank, "x.device", "torch.float32") == f"torch.empty({sizes}, device=x.device, dtype=torch.float32)"


def test_the_sizes_make_the_same_tensors_as_the_shape():
    for shape in [(3, 4), (5,), ()]:
        xs = torch.Size(shape)
        made = eval(empty("xs", len(shape), "'cpu'", "torch.float32"), {"torch": torch, "xs": xs})
        assert made.shape == xs and made.dtype == torch.float32


BROADCASTS = [
    # no operand of the output's shape: each size from an operand that varies along it
    ("torch.maximum(a, b)", "torch.randn(4, 1, 8), torch.randn(1, 5, 1)", "a, b"),
    # index tensors broadcast together (advanced indexing; bilinear upsampling is made of it)
    ("x[i, j]", "torch.randn(5, 7), torch.randint(-5, 5, (9, 1)), torch.randint(-7, 7, (1, 4))", "x, i, j"),
    ("x[:, i, j] * 2.0", "torch.randn(2, 5, 7), torch.randint(0, 5, (3, 1)), torch.randint(0, 7, (4,))", "x, i, j"),
    ("torch.nn.functional.interpolate(x, size=(12, 10), mode='bilinear', align_corners=False)",
     "torch.randn(2, 3, 6, 5)", "x"),
    # batched matrix products of the same batch (attention's scores): a check, no broadcast
    ("a @ b.transpose(-2, -1)", "torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5)", "a, b"),
    # a norm's prologue over a broadcast: the shape it reduces from the operands' sizes
    ("torch.softmax(a + b, dim=-1)", "torch.randn(4, 1), torch.randn(1, 6)", "a, b"),
    ("a - b * 2.0", "torch.randn(3, 1), torch.randn(6)", "a, b"),
    # one of the output's shape, and a bias, a column, a 0-d tensor
    ("torch.relu(x + b)", "torch.randn(4, 16), torch.randn(16)", "x, b"),
    ("x * b", "torch.randn(4, 6), torch.randn(4, 1)", "x, b"),
    ("x / b", "torch.randn(3, 5), torch.tensor(2.0)", "x, b"),
]


@pytest.mark.parametrize("expr,inputs,args", BROADCASTS, ids=[c[0] for c in BROADCASTS])
def test_broadcasts_verify_without_broadcast_shapes_or_expand(cpu_verifier, expr, inputs, args):
    cand = check(cpu_verifier, source(expr, inputs, args=args), [])
    forward = cand.source[cand.source.index("def forward"):]
    # none on the path the converted shapes take (a product's batch that differs after all is
    # broadcast in a branch of its own)
    taken = [line for line in forward.splitlines() if not line.startswith(" " * 12)]
    assert not any("broadcast_shapes" in line or ".expand(" in line for line in taken), forward


_CALL_WRONGLY = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model = module.ModelNew()
model(*eval(sys.argv[2]))  # as converted (the verifier checked its results)
for args in eval(sys.argv[3]):
    try:
        model(*args)
        print("no error")
    except ValueError as e:
        print(e)
"""

_AGAIN = "(convert it again with inputs shaped as you call it)"
WRONGLY = [
    ("torch.maximum(a, b)", "a, b", "", "torch.randn(4, 1, 8), torch.randn(1, 5, 1)",
     "[(torch.randn(4, 1, 8), torch.randn(1, 5, 3)), (torch.randn(4, 1, 8), torch.randn(5, 1))]",
     ["b has shape (1, 5, 3) where this module reads one of shape (1, 5, 1) beside an output of (4, 5, 8)",
      "b has shape (5, 1) where this module reads one of shape (1, 1, 1) beside an output of (4, 1, 8)"]),
    ("a / b", "a, b", "", "torch.randn(3, 5), torch.tensor(2.0)", "[(torch.randn(3, 5), torch.randn(5))]",
     ["b has shape (5,) where this module reads one of shape () beside an output of (3, 5)"]),
    # an index that does not broadcast with the other: PyTorch would raise too
    ("x[i, j]", "x, i, j", "", "torch.randn(5, 7), torch.randint(0, 5, (9, 1)), torch.randint(0, 7, (1, 4))",
     "[(torch.randn(5, 7), torch.randint(0, 5, (9, 1)), torch.randint(0, 7, (3, 4))),"
     " (torch.randn(5, 7), torch.randint(0, 5, (2, 1)), torch.randint(0, 7, (1, 6)))]",
     ["j has shape (3, 4) where this module reads one of shape (1, 4) beside indices broadcast to a shape of (9, 4)",
      "no error"]),
    # a batched product: a batch that broadcasts after all is broadcast; a shorter inner size raises
    ("a @ b", "a, b", "", "torch.randn(2, 3, 4, 5), torch.randn(2, 3, 5, 6)",
     "[(torch.randn(2, 3, 4, 5), torch.randn(2, 1, 5, 6)), (torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 6))]",
     ["no error", "matmul: the factors' inner sizes are 5 and 4, which must be equal"]),
    # operands of the output's shape are read flat: each one but the shape's source is checked
    ("a * 2.0 + b", "a, b", "", "torch.randn(4, 6), torch.randn(4, 6)", "[(torch.randn(4, 6), torch.randn(4, 5))]",
     ["b has shape (4, 5) where this module reads one of shape (4, 6) beside an output of (4, 6)"]),
    ("torch.softmax(a + b, dim=-1)", "a, b", "", "torch.randn(2, 100), torch.randn(2, 100)",
     "[(torch.randn(2, 100), torch.randn(2, 10))]",
     ["b has shape (2, 10) where this module reads one of shape (2, 100) beside an output of (2, 100)"]),
    # an index traced with a symbolic size of 1 (index_put's) goes through expand, which cannot tell
    # a size-1 dim the kernel never reads: that one is checked
    ("torch.ops.aten.index_put(x, [i, j, self.k], v)", "x, i, j, v",
     "self.register_buffer('k', torch.tensor([0, 2, 4, 6]))",
     "torch.randn(5, 6, 7), torch.tensor([[0], [1], [2]]), torch.tensor([[1]]), torch.randn(3, 4)",
     "[(torch.randn(5, 6, 7), torch.tensor([[0], [1], [2]]), torch.tensor([[0, 1, 2, 3]]), torch.randn(3, 4))]",
     ["j has shape (1, 4) where this module reads one of size 1 along dims (1,) beside indices broadcast to a "
      "shape of (3, 4)"]),
    # cat's inputs are copied as blocks of the output's rows: one of other sizes would be read past its end
    ("F.max_pool2d(torch.cat([a, b], 1), 2)", "a, b", "", "torch.randn(2, 3, 4, 4), torch.randn(2, 2, 4, 4)",
     "[(torch.randn(2, 3, 4, 4), torch.randn(2, 5, 4, 4)), (torch.randn(2, 3, 4, 4), torch.randn(2, 2, 4, 6))]",
     ["no error", "b has shape (2, 2, 4, 6) where this module reads one of sizes (2,) before dim 1 and (4, 4) after it "
      "beside a cat's output of (2, 5, 4, 4)"]),
    # a view of an input: sized by the caller too (read past its end unless checked)
    ("F.max_pool2d(torch.cat([a, b[:, :3]], 1), 2)", "a, b", "", "torch.randn(2, 3, 4, 4), torch.randn(2, 5, 4, 4)",
     "[(torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 2))]",
     ["slice_2 (a view of b) has shape (2, 3, 4, 2) where this module reads one of sizes (2,) before dim 1 and (4, 4) "
      "after it "
      "beside a cat's output of (2, 6, 4, 4)"]),
    ("torch.stack([a, b], 2).sum(2)", "a, b", "", "torch.randn(3, 4), torch.randn(3, 4)",
     "[(torch.randn(3, 4), torch.randn(3, 5))]",
     ["b has shape (3, 5) where this module reads one of shape (3, 4) beside a stack's output of (3, 4, 2)"]),
    # a parameter beside an input wider than at conversion: read past its end unless checked
    ("torch.relu(x + self.b)", "x", "self.b = nn.Parameter(torch.randn(16))", "torch.randn(4, 16)",
     "[(torch.randn(4, 32),)]",
     ["self.b has shape (16,) where this module reads one of shape (32,) beside an output of (4, 32)"]),
]


@pytest.mark.parametrize("expr,args,init,inputs,wrong,said", WRONGLY, ids=[c[0] for c in WRONGLY])
def test_an_operand_of_other_sizes_raises_a_clear_error(cpu_verifier, tmp_path, expr, args, init, inputs, wrong, said):
    cand = check(cpu_verifier, source(expr, inputs, args=args, init=init), [])
    (tmp_path / "candidate.py").write_text(cand.source)
    proc = subprocess.run([sys.executable, "-c", _CALL_WRONGLY, str(tmp_path / "candidate.py"), f"[{inputs}]", wrong],
                          capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # (a size no conversion fits, PyTorch raising too, says so without asking for another)
    assert proc.stdout.splitlines() == [line if line == "no error" or line.endswith("must be equal") else
                                        f"{line} {_AGAIN}" for line in said], proc.stdout


VIEWS = [  # forward's views as Tensor methods and Python indexing, not OpOverloads
    ("torch.relu(x.view(2, 3, 20).transpose(1, 2).contiguous()).flatten(1)", "torch.randn(2, 60)", ".view(2, 3, 20)"),
    ("torch.relu(x[:, 1:5, ::2].unsqueeze(1).expand(-1, 3, -1, -1))", "torch.randn(2, 6, 8)", "[:, :, 0::2]"),
    ("torch.relu(x.select(1, 2).reshape(-1)) + x.sum()", "torch.randn(3, 4, 5)", ".select(1, 2)"),
    ("torch.relu(x.permute(2, 0, 1).clone(memory_format=torch.contiguous_format))", "torch.randn(2, 3, 4)",
     ".permute(2, 0, 1)"),
]


@pytest.mark.parametrize("expr,inputs,spelled", VIEWS)
def test_views_are_tensor_methods_and_compute_what_the_operators_do(cpu_verifier, expr, inputs, spelled):
    """`x.view(...)` costs the host 1.4 us on an H200's, `torch.ops.aten.view.default(x, [...])`
    3.4 us: forward calls views, size reads and factories the cheap way."""
    cand = check(cpu_verifier, source(expr, inputs), [])
    forward = cand.source.split("def forward")[1]
    assert "torch.ops.aten" not in forward, forward
    assert spelled in forward, forward
