"""Copies that change nothing dropped at capture (drtriton/elide_copies.py, issue 17): eval-mode
dropout and `clone()` of a computed value; a copy returned, of a view or of an input stays."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, check, source  # noqa: E402

from drtriton.capture import Graph, Node, Value  # noqa: E402
from drtriton.elide_copies import elide_copies  # noqa: E402

MLP = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 8), nn.Dropout(0.1))
        self.eval()

    def forward(self, x):
        return x + self.net(x).clone()


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def _clones(src: str) -> int:
    _, graph, _ = capture(src)
    return sum(n.target == "aten.clone.default" for n in graph.nodes)


def test_eval_dropout_and_a_clone_of_a_computed_value_are_dropped(cpu_verifier):
    assert _clones(MLP) == 0
    cand = check(cpu_verifier, MLP, ["linear"])
    assert ".clone(" not in cand.source


@pytest.mark.parametrize("expr", ["(x * 2).clone()",  # returned: the caller may change it
                                  "x[:, :3].clone().view(-1) * 2",  # a slice's copy is contiguous
                                  "x.clone().view(-1) * 2"],  # an input may be laid out otherwise
                         ids=["returned", "of-a-slice", "of-an-input"])
def test_copies_that_may_change_something_stay(expr):
    assert _clones(source(expr, "torch.randn(4, 5)")) == 1


def test_a_copy_written_into_afterwards_stays():
    values = {n: Value(n, [3], "torch.float32", "input" if n == "x" else "node") for n in ("x", "y", "c", "out")}
    nodes = [Node("y", "aten.relu.default", [{"value": "x"}], {}, ["y"]),
             Node("c", "aten.clone.default", [{"value": "y"}], {}, ["c"]),
             Node("add_", "aten.add_.Tensor", [{"value": "c"}, {"value": "x"}], {}, ["out"])]
    graph = elide_copies(Graph(values, nodes, ["x"], ["out"]))
    assert [n.target for n in graph.nodes] == ["aten.relu.default", "aten.clone.default", "aten.add_.Tensor"]


def test_a_copy_written_into_through_a_view_stays():
    values = {n: Value(n, [3, 2], "torch.float32", "input" if n == "x" else "node")
              for n in ("x", "y", "c", "s", "out")}
    nodes = [Node("y", "aten.relu.default", [{"value": "x"}], {}, ["y"]),
             Node("c", "aten.clone.default", [{"value": "y"}], {}, ["c"]),
             Node("s", "aten.select.int", [{"value": "c"}, 1, 0], {}, ["s"]),
             Node("fill_", "aten.fill_.Scalar", [{"value": "s"}, 0.0], {}, ["out"])]
    graph = elide_copies(Graph(values, nodes, ["x"], ["out"]))
    assert "aten.clone.default" in [n.target for n in graph.nodes]
