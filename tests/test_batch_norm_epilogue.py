"""Eval-mode batch norm after a convolution or a matrix product runs in that operator's epilogue
(drtriton/batch_norm_epilogue.py), its scale and shift computed from the parameters where they
are read (drtriton/policy/recompute.py, "parameter" values). Each case runs capture ->
BuiltinPolicy -> the Verifier under the Triton interpreter, on running statistics that are not
PyTorch's defaults (a mean of 0 and a variance of 1 would hide a wrong shift or scale)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, check, first_candidate, source  # noqa: E402

from drtriton.policy.program import Program  # noqa: E402

STATS = """self.{name} = {module}
self.{name}.running_mean.uniform_(-2, 2)
self.{name}.running_var.uniform_(0.5, 3)
self.eval()"""


def _init(layer: str, bn: str, extra: str = "") -> str:
    return f"self.layer = {layer}\n" + STATS.format(name="bn", module=bn) + (f"\n{extra}" if extra else "")


CASES = [  # (layer, batch norm, forward, input, the one kernel's label)
    ("nn.Conv2d(16, 8, 3, padding=1, bias=False)", "nn.BatchNorm2d(8)", "F.silu(self.bn(self.layer(x)))",
     "torch.randn(2, 16, 6, 7)", "conv2d, mul, add, silu"),
    ("nn.Conv2d(4, 6, 1)", "nn.BatchNorm2d(6, affine=False)", "torch.relu(self.bn(self.layer(x)))",
     "torch.randn(2, 4, 5, 3)", "conv2d, mul, add, relu"),
    ("nn.Conv1d(4, 6, 3, padding=1)", "nn.BatchNorm1d(6, eps=1e-3)", "self.bn(self.layer(x)) * 2.0",
     "torch.randn(3, 4, 9)", "conv1d, mul, add, mul_scalar"),
    ("nn.Linear(12, 10)", "nn.BatchNorm1d(10)", "torch.tanh(self.bn(self.layer(x)))",
     "torch.randn(5, 12)", "linear, mul, add, tanh"),
    ("nn.Conv2d(6, 6, 3, padding=1, groups=6)", "nn.BatchNorm2d(6)", "F.hardtanh(self.bn(self.layer(x)), 0, 6)",
     "torch.randn(2, 6, 5, 5)", "conv2d, mul, add, hardtanh"),  # depthwise, as MobileNet's
]


@pytest.mark.parametrize("layer, bn, expr, inputs, label", CASES, ids=[c[4] for c in CASES])
def test_batch_norm_after_a_product_is_its_epilogue(cpu_verifier, layer, bn, expr, inputs, label):
    src = source(expr, inputs, init=_init(layer, bn))
    cand = check(cpu_verifier, src, [label])
    assert cand.plan == [f"{label}: Triton" + cand.plan[0].split(": Triton")[1]], cand.plan  # one fragment
    assert cand.source.count("@triton.jit") == 1
    assert "batch_norm" not in cand.description.split(":")[0]


def test_a_convolution_output_read_elsewhere_keeps_the_batch_norm(cpu_verifier):
    """The convolution's output is needed as it is: the batch norm stays whole (its template)."""
    src = source("(lambda y: self.bn(y) * y.sigmoid())(self.layer(x))", "torch.randn(2, 4, 5, 6)",
                 init=_init("nn.Conv2d(4, 6, 3)", "nn.BatchNorm2d(6)"))
    _, graph, _ = capture(src)
    assert [n.op for n in graph.nodes if n.op == "batch_norm"] == ["batch_norm"]
    check(cpu_verifier, src, ["batch_norm"])


def test_training_mode_keeps_the_batch_norm():
    src = source("self.bn(self.layer(x))", "torch.randn(4, 4, 5, 6)",
                 init="self.layer = nn.Conv2d(4, 6, 3)\nself.bn = nn.BatchNorm2d(6)")
    _, graph, _ = capture(src)
    assert [n.op for n in graph.nodes if n.op == "batch_norm"] == ["batch_norm"]


def test_a_parameter_expression_is_computed_where_it_is_read(cpu_verifier):
    """`x * (1 + w)` (Gemma's norm weight): the `1 + w` is no kernel of its own, and a buffer's
    exp() read by two elementwise kernels is computed in each."""
    init = "self.w = nn.Parameter(torch.randn(8))\nself.register_buffer('t', torch.rand(8))"
    src = source("(x * (1 + self.w), torch.sigmoid(x) + self.t.exp(), x.sum(0) * self.t.exp())",
                 "torch.randn(3, 8)", init=init)
    problem, graph, _ = capture(src)
    program = Program(graph)
    assert {n.op for n in program.nodes if n.name in program.recomputed} == {"add_scalar", "exp"}
    cand = check(cpu_verifier, src, ["mul"])
    assert not any(line.startswith(("add_scalar", "exp")) for line in cand.plan), cand.plan
    _, first = first_candidate(src)
    assert first.source.count("tl.exp(") >= 2  # computed in both of its readers


@pytest.mark.parametrize("layer, channels, inputs", [
    ("nn.Conv2d(6, 6, 3, padding=1, groups=6)", 6, "torch.randn(2, 6, 5, 5)"),  # a channel per program
    ("nn.Conv2d(16, 8, 3, padding=1, bias=False)", 8, "torch.randn(2, 16, 6, 7)"),  # a row of channels
    ("nn.Linear(12, 10)", 10, "torch.randn(5, 12)"),
])
def test_the_scale_and_shift_are_computed_per_channel(layer, channels, inputs):
    """The statistics are loaded at the channel alone (one scalar per depthwise program, a row of
    BLOCK_N channels for a product), masked by the channel count, so the square root runs once
    per channel, not at every element of the tile; the CASES above check the values."""
    _, cand = first_candidate(source("self.bn(self.layer(x))", inputs,
                                     init=_init(layer, f"nn.BatchNorm{1 if 'Linear' in layer else 2}d({channels})")))
    loads = [line for line in cand.source.splitlines() if "tl.load(" in line and "bn_running_var" in line]
    assert loads, cand.source
    for line in loads:
        assert "* 0" not in line and re.search(rf"mask=.*[\w\]] < {channels}\)?, other=0\)", line), line


def test_a_parameter_value_keeps_its_dtype_when_broadcast(cpu_verifier):
    """An int8 buffer's value computed per column is broadcast to the tile without widening: the
    sum with x wraps in int8, as PyTorch's (an int32 zero added to it had 18 of 64 elements wrong)."""
    init = "self.register_buffer('b', torch.randint(-128, 128, (16,), dtype=torch.int8))"
    src = source("((self.b * 3) + x) > 0", "torch.randint(-128, 128, (4, 16), dtype=torch.int8)", init=init)
    check(cpu_verifier, src, [])


def test_a_parameter_read_at_a_pooling_window_s_padding_stays_in_bounds(cpu_verifier):
    """A pooling prologue's coordinates are negative in the window's padding: a parameter read at
    them is masked on both sides (the tile mask discards those lanes, but a load past the start of
    the parameter would still be an out-of-bounds read on a GPU)."""
    src = source("self.pool(x * torch.sigmoid(self.pos))", "torch.randn(2, 3, 5, 6)",
                 init="self.pos = nn.Parameter(torch.randn(6))\nself.pool = nn.MaxPool2d(2, stride=2, padding=1)")
    cand = check(cpu_verifier, src, [])
    loads = [line for line in cand.source.splitlines() if "tl.load(pos_ptr" in line]
    assert loads and all(">= 0)" in line for line in loads), loads
