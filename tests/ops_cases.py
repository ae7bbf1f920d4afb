"""Random operator cases shared by the ops tests: ranks, shapes, attributes and parameters.

Shapes of later inputs are drawn related to the first one (through the operator's own ``fresh``
hook, by copying aligned axes, or at random) so that both accepted and rejected cases occur.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from drtriton.ops import Operator
from drtriton.ops.indexing import ends_source, offsets_source
from drtriton.ops.shape import ConcreteContext, ShapeError

MAX_SIZE = 5


@dataclass
class Case:
    op: Operator
    shapes: list[list[int]]
    attrs: dict[str, Any]  # sampled attributes plus the drawn parameters
    ranks: list[int] = field(default_factory=list)


def _related(data, op: Operator, slot: int, first: list[int], rank_opts: tuple[int, ...]) -> list[int]:
    mode = data.draw(st.sampled_from(("fresh", "copy", "random")))
    size = st.integers(1, MAX_SIZE)
    if mode == "fresh" and op.fresh is not None:
        spec = op.fresh(random.Random(data.draw(st.integers(0, 2**16))), slot, 0, len(first))
        if len(spec) in rank_opts:
            return [data.draw(size) if d == "free" else 1 if d == "one" else first[d] for d in spec]
    rank = data.draw(st.sampled_from(rank_opts))
    if mode == "random":
        return [data.draw(size) for _ in range(rank)]
    out = []
    for i in range(rank):
        j = len(first) - rank + i
        out.append(first[j] if 0 <= j < len(first) and data.draw(st.integers(0, 4)) else data.draw(size))
    return out


def draw_case(data, op: Operator) -> Case:
    ranks: dict[int, int] = {}
    shapes: list[list[int]] = []
    for slot in range(op.arity):
        options = op.rank_options(slot, ranks)
        if slot == 0:
            shape = [data.draw(st.integers(1, MAX_SIZE)) for _ in range(data.draw(st.sampled_from(options)))]
        else:
            shape = _related(data, op, slot, shapes[0], options)
        ranks[slot] = len(shape)
        shapes.append(shape)
    rank_list = [len(s) for s in shapes]
    attrs = op.sample_attrs(random.Random(data.draw(st.integers(0, 2**32))), rank_list)
    ranges = {p.name: p.test_range for p in op.params}

    def source(name, index, lo, hi):
        return data.draw(st.integers(*ranges[name]), label=name)

    ctx = ConcreteContext(attrs, source)
    try:
        op.rule(ctx, [list(s) for s in shapes], attrs)
    except ShapeError:
        pass
    # parameters the rule did not reach before rejecting still need a value for PyTorch
    n = len(attrs.get("kernel_size", ())) or 1
    drawn = dict(ctx.drawn)
    for p in op.params:
        if p.per_spatial:
            have = list(drawn.get(p.name, []))
            drawn[p.name] = tuple(have + [data.draw(st.integers(*p.test_range)) for _ in range(n - len(have))])
        elif p.name not in drawn:
            drawn[p.name] = data.draw(st.integers(*p.test_range))
    return Case(op, shapes, {**attrs, **drawn}, rank_list)


def torch_inputs(case: Case):
    import torch

    tensors = []
    for slot, shape in zip(case.op.slots, case.shapes):
        if slot.domain == "index":
            src, axis = slot.index_of
            high = case.shapes[src][axis] if len(case.shapes[src]) > axis else 1
            tensors.append(torch.randint(0, max(high, 1), tuple(shape)))
        elif slot.domain == "offsets":
            src, axis = slot.index_of
            tensors.append(eval(offsets_source(case.shapes[src][axis], shape), {"torch": torch}))  # noqa: S307
        elif slot.domain == "ends":
            src, axis = slot.index_of
            tensors.append(eval(ends_source(case.shapes[src][axis], shape), {"torch": torch}))  # noqa: S307
        elif slot.domain == "positive":
            tensors.append(torch.rand(tuple(shape)) + 0.5)
        elif slot.domain in ("unit", "probability"):
            tensors.append(torch.rand(tuple(shape)))
        elif slot.domain == "above_one":
            tensors.append(torch.rand(tuple(shape)) + 1.0)
        elif slot.domain == "mask":
            tensors.append(torch.rand(tuple(shape)) > 0.5)
        elif slot.domain == "integer":
            tensors.append(torch.randint(-64, 64, tuple(shape)))
        else:
            tensors.append(torch.randn(tuple(shape)))
    return tensors


def run_torch(case: Case):
    """PyTorch's verdict: the output tensor, or the exception it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return case.op.reference(torch_inputs(case), case.attrs)
        except Exception as exc:  # noqa: BLE001 - any rejection counts
            return exc


def run_rule(case: Case):
    try:
        return case.op.output_shape(case.shapes, case.attrs), case.op.flops(case.shapes, case.attrs)
    except ShapeError as exc:
        return exc
