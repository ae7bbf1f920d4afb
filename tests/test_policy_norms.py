"""The built-in policy's normalisations (drtriton/policy/emit/norms.py) and the elementwise
layouts (drtriton/policy/emit/elementwise.py), end to end on CPU: capture -> BuiltinPolicy ->
the Verifier under the Triton interpreter. Each norm runs both templates (short rows held in
registers; long rows as stats, finish, apply), with fused prologues and epilogues whose
operands broadcast per channel; shapes are the smallest that cross the templates' thresholds."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_policy_pool_scan_loss import check, first_candidate, source  # noqa: E402

from drtriton.policy.emit import elementwise, norms  # noqa: E402

LONG = "statistics:"  # the long-row template's stats kernel comment
SHORT = "whole rows"

# (module init, forward expression, inputs, fused label, template)
CASES = [
    # layer norm over the last dim, short rows, several rows a program, epilogue
    ("self.ln = nn.LayerNorm(48)", "torch.relu(self.ln(x * 2.0)) + 1.0", "torch.randn(37, 48)",
     "mul_scalar, layer_norm, relu, add_scalar", SHORT),
    # layer norm over two dims, long rows (R > MAX_SHORT_ROW) split into several chunks
    ("self.ln = nn.LayerNorm([9, 2000])", "self.ln(x)", "torch.randn(3, 9, 2000) * 3 + 5", "layer_norm", LONG),
    ("self.rn = nn.RMSNorm(40)", "self.rn(x)", "torch.randn(5, 7, 40)", "rms_norm", SHORT),
    ("self.rn = nn.RMSNorm([5, 1000])", "self.rn(x)", "torch.randn(2, 5, 1000)", "rms_norm", LONG),
    # group norm after a GEMM: (N, C), short rows of C/G
    ("self.gn = nn.GroupNorm(4, 32)", "torch.sigmoid(self.gn(x)) * x", "torch.randn(20, 32)",
     "group_norm, sigmoid, mul", SHORT),
    # group norm with a spatial extent, short rows; the epilogue's operand per channel
    ("self.gn = nn.GroupNorm(2, 6)\nself.s = nn.Parameter(torch.randn(6, 1, 1))",
     "self.gn(x) * self.s", "torch.randn(3, 6, 5, 7)", "group_norm, mul", SHORT),
    # long rows: channels of >= MIN_APPLY_ROW elements (apply per (n, c), scalar statistics),
    # a prologue recomputed in stats and apply
    ("self.gn = nn.GroupNorm(2, 4)\nself.b = nn.Parameter(torch.randn(4, 1, 1))",
     "self.gn(torch.tanh(x) + self.b)", "torch.randn(2, 4, 48, 48)", "add, group_norm", LONG),
    # long rows of short channels: apply over rows of (n), channel per element
    ("self.gn = nn.GroupNorm(3, 48)", "self.gn(x)", "torch.randn(2, 48, 13, 29)", "group_norm", LONG),
    ("self.inn = nn.InstanceNorm2d(3, affine=True)", "self.inn(x) - 0.5", "torch.randn(2, 3, 9, 11)",
     "instance_norm, add_scalar", SHORT),
    ("self.inn = nn.InstanceNorm2d(3)", "self.inn(x * x)", "torch.randn(2, 3, 80, 70)", "mul, instance_norm", LONG),
    # a weight without a bias (bias=False: the kernel took a bias pointer it was not given) and a
    # bias without a weight (it was dropped), in both templates
    ("self.inn = nn.InstanceNorm1d(3, affine=True, bias=False)", "self.inn(x)", "torch.randn(4, 3, 15)",
     "instance_norm", SHORT),
    ("self.gn = nn.GroupNorm(3, 48, bias=False)", "self.gn(x)", "torch.randn(2, 48, 13, 29)", "group_norm", LONG),
    ("self.b = nn.Parameter(torch.randn(40))", "F.layer_norm(x, (40,), None, self.b)", "torch.randn(5, 40)",
     "layer_norm", SHORT),
    ("self.b = nn.Parameter(torch.randn(4))", "F.group_norm(x, 2, None, self.b)", "torch.randn(2, 4, 48, 48)",
     "group_norm", LONG),
]


@pytest.mark.parametrize("init,expr,inputs,label,template", CASES, ids=[c[1] + " " + c[2] for c in CASES])
def test_norm(cpu_verifier, init, expr, inputs, label, template):
    cand = check(cpu_verifier, source(expr, inputs, init=init), [label])
    assert template in cand.source, cand.source


def test_long_rows_split_into_chunks():
    """A few long rows give the stats kernel several chunks each (enough programs)."""
    _, cand = first_candidate(source("self.gn(x)", "torch.randn(2, 4, 48, 48)", init="self.gn = nn.GroupNorm(2, 4)"))
    assert f"_R // {norms.MIN_CHUNK}" in cand.source and "_stat" in cand.source


ROWS = "as rows of dims"


@pytest.mark.parametrize("expr,inputs,init,layout", [
    # a bias per channel over (N, C, H, W): rows of (n, c), the bias a scalar load per program
    ("torch.relu(x) + self.b", "torch.randn(2, 3, 20, 30)", "self.b = nn.Parameter(torch.randn(3, 1, 1))", ROWS),
    # per-channel and per-sample operands together: rows of (n, c) still
    ("x * self.b + y", "torch.randn(2, 3, 20, 30), torch.randn(2, 1, 1, 1)",
     "self.b = nn.Parameter(torch.randn(3, 1, 1))", ROWS),
    # an operand along a short last dim: flat layout with index arithmetic
    ("x + self.b", "torch.randn(4, 200)", "self.b = nn.Parameter(torch.randn(200))", "one pass over"),
    # along a long last dim: rows of every other dim, the operand read at its column
    ("x + self.b", "torch.randn(3, 640)", "self.b = nn.Parameter(torch.randn(640))", ROWS),
    # operands broadcast both ways (issue 17's (16, 1, 1024) beside (1, 256, 1)): rows of (i0, i1),
    # x at (i0, column), y a scalar per row
    ("torch.maximum(x, y)", "torch.randn(3, 1, 600), torch.randn(1, 4, 1)", "", ROWS),
    # rows too short for the rows layout: flat
    ("x + self.b", "torch.randn(2, 3, 4, 5)", "self.b = nn.Parameter(torch.randn(3, 1, 1))", "one pass over"),
])
def test_elementwise_layouts(cpu_verifier, expr, inputs, init, layout):
    args = "x, y" if inputs.count("torch.") > 1 else "x"
    cand = check(cpu_verifier, source(expr, inputs, args=args, init=init), [])
    assert layout in cand.source, cand.source
    if layout == ROWS and "(3, 1, 1)" in init:
        assert "tl.load(b_ptr + i1 * b_s1)" in cand.source  # one scalar load per program
    if layout == ROWS:  # no division per element: only the row number is divided
        assert "cols //" not in cand.source and "offs //" not in cand.source, cand.source
    else:
        assert ROWS not in cand.source



def test_apply_rows_past_the_grid_are_refused():
    """A layer norm over the whole of a huge tensor would need more apply blocks than the grid's
    second axis holds: the emitter says so (the planner then falls back), it does not emit a
    launch that fails."""
    from drtriton.policy.emit import Names, Unsupported
    from drtriton.policy.program import Program
    from test_policy_pool_scan_loss import capture

    _, graph, _ = capture(source("F.layer_norm(x, x.shape)", "torch.randn(2, 3)"))
    program = Program(graph)
    (frag,) = [f for f in program.fragments() if f.kind == "norm"]
    program.values[program.inputs_of(frag.anchor)[0]].shape = [8, 1 << 26]  # as if captured so
    program.values[frag.anchor.outputs[0]].shape = [8, 1 << 26]
    frag.anchor.attrs["normalized_dims"] = 2
    with pytest.raises(Unsupported, match="grid"):
        norms.emit(program, frag, {}, Names(), device="cpu")
