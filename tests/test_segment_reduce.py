"""Segment reductions (drtriton/policy/emit/segment.py), end to end on the CPU: nn.EmbeddingBag,
F.embedding_bag and torch.segment_reduce captured as one `segment_reduce` node, its first strict
candidate verified under the Triton interpreter against PyTorch. Bags are empty, padded and of
one length; segments come as offsets or lengths, along any axis, with an initial value."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from drtriton.policy.fragments import fragment_task  # noqa: E402
from drtriton.policy.program import Fragment, Program  # noqa: E402
from test_policy_pool_scan_loss import capture, source  # noqa: E402
from test_scatter import check  # noqa: E402

BAG = "torch.randint(0, 10, (12,)), torch.tensor([0, 3, 3, 7])"  # an empty bag among them


@pytest.mark.parametrize("init,inputs,args,call", [
    ("nn.EmbeddingBag(10, 5, mode='mean')", BAG, "i, o", "i, o"),
    ("nn.EmbeddingBag(10, 5, mode='max')", BAG, "i, o", "i, o"),
    ("nn.EmbeddingBag(10, 5, mode='sum')", BAG + ", torch.rand(12)", "i, o, w", "i, o, per_sample_weights=w"),
    ("nn.EmbeddingBag(10, 5, mode='mean', padding_idx=2)", BAG, "i, o", "i, o"),
    ("nn.EmbeddingBag(10, 5, mode='max', padding_idx=2)", "torch.tensor([2, 2, 1, 5, 2, 7]), torch.tensor([0, 2, 4])",
     "i, o", "i, o"),  # a bag of padding only: 0, as in PyTorch
    ("nn.EmbeddingBag(10, 5, mode='sum', include_last_offset=True)", "torch.randint(0, 10, (12,)), "
     "torch.tensor([0, 3, 3, 7, 12])", "i, o", "i, o"),
])
def test_embedding_bag_is_one_kernel(cpu_verifier, init, inputs, args, call):
    cand = check(cpu_verifier, source(f"self.bag({call})", inputs, args, init=f"self.bag = {init}"),
                 ["segment_reduce"], second=False)
    assert cand.source.count("@triton.jit") - cand.source.count("def _seg_") == 1, cand.plan


def test_functional_embedding_bag_without_gradients(cpu_verifier):
    """F.embedding_bag of a weight that needs no gradient (a plain tensor, inference) traces to
    _embedding_bag_forward_only (OpInfo's sample): the same node."""
    check(cpu_verifier, source("F.embedding_bag(i, w, o, mode='sum', per_sample_weights=s)",
                               "torch.randn(10, 5), " + BAG + ", torch.rand(12)", "w, i, o, s"), ["segment_reduce"],
          second=False)


@pytest.mark.parametrize("mode", ["sum", "max"])
def test_embedding_bag_of_fixed_length_bags(cpu_verifier, mode):
    """2-D input (bags of one length): the batch halves on the second configuration."""
    check(cpu_verifier, source("self.bag(i)", "torch.randint(0, 10, (6, 3))", "i",
                               init=f"self.bag = nn.EmbeddingBag(10, 5, mode={mode!r})"), ["segment_reduce"])


def test_embedding_bag_with_an_epilogue(cpu_verifier):
    """Elementwise work on the bags runs in the segment kernel, before its one store."""
    cand = check(cpu_verifier, source("torch.relu(self.bag(i, o)) * 2.0", BAG, "i, o",
                                      init="self.bag = nn.EmbeddingBag(10, 5, mode='sum')"),
                 ["segment_reduce, relu, mul_scalar"], second=False)
    assert "tl.atomic" not in cand.source


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("bounds", ["offsets=torch.tensor([0, 0, 1, 3, 5])", "lengths=torch.tensor([0, 1, 2, 2])"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(cpu_verifier, reduce, bounds, initial):
    """OpInfo's samples: an empty segment first (its value: the initial one, else the
    reduction's identity; a mean's is NaN)."""
    name = bounds.split("=")[0]
    check(cpu_verifier, source(f"torch.segment_reduce(x, {reduce!r}, {name}={name}, initial={initial})",
                               f"torch.randn(5, 3), {bounds.split('=', 1)[1]}", f"x, {name}"),
          ["segment_reduce"], second=False)


def test_segment_reduce_along_a_later_axis(cpu_verifier):
    """Bounds per row of the axes before: lengths of shape (3, 2) over axis 1 of (3, 4, 2)."""
    check(cpu_verifier, source("torch.segment_reduce(x, 'sum', lengths=l, axis=1)",
                               "torch.randn(3, 4, 2), torch.tensor([[1, 3], [2, 2], [4, 0]])", "x, l"),
          ["segment_reduce"], second=False)


def test_a_fragment_draws_valid_offsets():
    """A fragment problem draws its own inputs: bounds are drawn sorted, from 0 to the
    element count (random integers would read past the data)."""
    src = source("torch.segment_reduce(x, 'sum', offsets=o) * 2.0", "torch.randn(7, 3), torch.tensor([0, 2, 7])",
                 "x, o")
    problem, graph, _ = capture(src)
    program = Program(graph)
    task = fragment_task(program, Fragment(list(program.nodes), None, "torch"), problem)
    ns: dict = {}
    exec(task.problem.source, ns)
    for _ in range(20):
        x, o = ns["get_inputs"]()
        assert o[0] == 0 and o[-1] == x.shape[0] and bool((o[1:] >= o[:-1]).all()), o


def test_embedding_bag_max_counts_a_nan_only_as_a_bags_first_row(cpu_verifier):
    """PyTorch's EmbeddingBag max replaces a value only with a greater one: a NaN row first in its
    bag gives NaN, a NaN row later is passed over (random tables never hold NaN: a table with one)."""
    import torch.nn as nn

    bag = nn.EmbeddingBag(4, 3, mode="max")
    with torch.no_grad():
        bag.weight[0, 1] = float("nan")  # row 0: second in bag 0, first in bag 2
    want = bag(torch.tensor([1, 0, 2, 3, 0, 2]), torch.tensor([0, 2, 4]))
    assert not want[0].isnan().any() and want[2, 1].isnan()  # (what the problem below checks)
    check(cpu_verifier, source("self.bag(i, o)", "torch.tensor([1, 0, 2, 3, 0, 2]), torch.tensor([0, 2, 4])", "i, o",
                               init="self.bag = nn.EmbeddingBag(4, 3, mode='max')\n"
                                    "with torch.no_grad():\n    self.bag.weight[0, 1] = float('nan')"),
          ["segment_reduce"], second=False)
