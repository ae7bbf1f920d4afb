"""Program structure: the DAG of compute operators, before any size is known.

Operators come in a given order (drawn uniformly by the caller). Each one consumes at least one
*pending* result (an operator output nothing has used yet) unless it starts a new branch, and
fills its other inputs from existing tensors (skip connections) or new program inputs. Branching
is only allowed while the remaining operators have enough free input slots to join every branch
again, so every operator contributes to the single output.

Ranks are fixed here; sizes are CP-SAT's job (``solve``). When a pending result has the wrong
rank for the slot it feeds, layout glue adapts it (``flatten`` of trailing axes, leading
``unsqueeze``), and integer results (argmax) are cast with ``.float()``. A few structures whose
output would not depend on the inputs are refused (``StructureError``): a constant value range
(``relu`` of values that are all negative), and a reduction over axes an upstream softmax or
normalisation already normalised (``softmax(x, 1).sum(1)`` is all ones).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from drtriton.ops import get
from drtriton.ops.operator import FRESH_ONLY, Operator
from drtriton.ops.ranges import UNBOUNDED, UNIT, Range
from drtriton.ops.shape import ShapeError
from drtriton.training.synth.config import Knobs

#: Value ranges of fresh inputs by domain.
INPUT_RANGES: dict[str, Range] = {"real": UNBOUNDED, "positive": (0.5, 1.5), "unit": UNIT, "index": (0.0, float("inf")),
                                  "mask": UNIT, "above_one": (1.0, 2.0), "probability": UNIT,
                                  "integer": (-64.0, 64.0), "offsets": (0.0, float("inf")),
                                  "ends": (0.0, float("inf"))}
#: dtypes of fresh inputs by domain (float32 otherwise)
INPUT_DTYPES: dict[str, str] = {"index": "int64", "mask": "bool", "integer": "int64", "offsets": "int64",
                                "ends": "int64"}
#: Relative weights of ranks for new inputs (rank 0 is rare but legal).
RANK_WEIGHTS = {0: 0.2, 1: 1.0, 2: 3.0, 3: 3.0, 4: 3.0, 5: 1.5}


class StructureError(Exception):
    """This wiring cannot work (the caller retries with new random choices)."""


@dataclass
class TensorNode:
    id: int
    rank: int
    dtype: str
    value_range: Range
    producer: int | None = None  # op index, or None for a program input
    domain: str = "real"  # inputs: how they are drawn
    #: inputs: per axis "free", "one", or (slot, axis): the size of that axis of the consuming
    #: op's (adapted) input in ``slot``
    dims: list[Any] = field(default_factory=list)
    consumer: int | None = None  # inputs: the op they were made for
    normalized: frozenset[int] | None = None  # axes an upstream normaliser fixed


@dataclass
class Use:
    """An operator input: a tensor, possibly adapted to the slot's rank and dtype."""

    tensor: int
    flatten: int | None = None  # flatten(start_dim)
    unsqueeze: int = 0  # leading size-1 axes
    cast: bool = False  # .float()
    into: str | None = None  # a narrower slot domain reached through glue (layout.INTO_DOMAIN)

    @property
    def adapted(self) -> bool:
        return self.flatten is not None or self.unsqueeze > 0


@dataclass
class OpNode:
    index: int
    name: str
    uses: list[Use]
    attrs: dict[str, Any]
    output: int

    @property
    def op(self) -> Operator:
        return get(self.name)


@dataclass
class Graph:
    tensors: list[TensorNode] = field(default_factory=list)
    ops: list[OpNode] = field(default_factory=list)

    @property
    def output(self) -> int:
        return self.ops[-1].output

    @property
    def inputs(self) -> list[TensorNode]:
        return [t for t in self.tensors if t.producer is None]

    def add_tensor(self, **kwargs) -> TensorNode:
        node = TensorNode(id=len(self.tensors), **kwargs)
        self.tensors.append(node)
        return node


def _pick_rank(rng: random.Random, options: tuple[int, ...], prefer: int | None = None) -> int:
    if prefer in options and rng.random() < 0.7:
        return prefer
    weights = [RANK_WEIGHTS.get(r, 1.0) for r in options]
    return rng.choices(options, weights)[0]


def _adapt(tensor: TensorNode, options: tuple[int, ...], domain: str = "real") -> tuple[Use, int]:
    """Use ``tensor`` in a slot accepting ``options`` ranks, via the nearest admissible rank, and
    in a slot of a narrower ``domain`` through glue when its values may fall outside."""
    use = Use(tensor.id, cast=tensor.dtype != "float32" and domain != "mask")
    if domain != "real" and not _domain_ok(tensor, domain):
        use.into = domain
    rank = tensor.rank
    if rank in options:
        return use, rank
    target = min(options, key=lambda r: (abs(r - rank), r < rank))
    if target < rank:
        if target < 1:
            raise StructureError(f"cannot flatten rank {rank} to {target}")
        use.flatten = target - 1
    else:
        use.unsqueeze = target - rank
    return use, target


def _domain_ok(tensor: TensorNode, domain: str) -> bool:
    lo, hi = tensor.value_range
    if domain == "mask" or tensor.dtype != "float32":
        return domain == "mask" and tensor.dtype == "bool"
    return domain == "real" or (domain == "positive" and lo >= 0.25) or (domain == "unit" and 0 <= lo and hi <= 1)


def _absorbers(op: Operator) -> list[int]:
    """Slots a pending result may feed: any but class indices (positive and unit ones through
    domain glue)."""
    return [j for j, slot in enumerate(op.slots) if slot.domain not in FRESH_ONLY]


#: what domain glue maps any value into (|v| + 0.5, sigmoid(v))
GLUE_RANGES: dict[str, Range] = {"positive": (0.5, float("inf")), "unit": UNIT, "mask": UNIT}


def _use_range(graph: Graph, use: Use) -> Range:
    return GLUE_RANGES[use.into] if use.into else graph.tensors[use.tensor].value_range


class _Builder:
    def __init__(self, names: list[str], rng: random.Random, knobs: Knobs):
        self.names, self.rng, self.knobs = names, rng, knobs
        self.graph = Graph()
        self.pending: list[int] = []
        self._pending_before: list[int] = []  # for rolling back the last operator
        self.capacity = [len(_absorbers(get(n))) for n in names]

    def build(self) -> Graph:
        for i, name in enumerate(self.names):
            self._add_with_lookahead(i, get(name))
        assert self.pending == [self.graph.output]
        return self.graph

    def _add_with_lookahead(self, i: int, op: Operator, tries: int = 4) -> None:
        """Add operator ``i``, redrawing its inputs and attributes a few times when the result
        has a rank the next operator cannot take without layout glue (the glue adds size-1 axes
        that pooling or convolutions then cannot use)."""
        # the next operator that constrains ranks (elementwise unary ones pass the rank through)
        nxt = next((get(n) for n in self.names[i + 1:] if get(n).category != "elementwise_unary"), None)
        if nxt is None:
            return self._add_op(i, op)
        wanted = {r for slot in _absorbers(nxt) for r in nxt.rank_options(slot, {})}
        for attempt in range(tries):
            mark = len(self.graph.tensors)
            self._add_op(i, op)
            if self.graph.tensors[-1].rank in wanted or attempt == tries - 1:
                return
            del self.graph.tensors[mark:]  # roll back: this op's inputs and output
            self.graph.ops.pop()
            self.pending = self._pending_before

    def _choose_sinks(self, i: int) -> list[int]:
        pending, rng = self.pending, self.rng
        # pending results later operators can still join: each absorbs up to capacity - 1 extra
        spare = sum(c - 1 for c in self.capacity[i + 1:])
        must, can = max(0, len(pending) - spare), min(len(pending), self.capacity[i])
        if must > can:  # pragma: no cover - the invariant below makes this impossible
            raise StructureError("cannot join all branches")
        if not pending or (must == 0 and rng.random() < self.knobs.branch):
            return []
        count = max(must, 1)
        while count < can and rng.random() < self.knobs.merge:
            count += 1
        return [pending[-1]] + rng.sample(pending[:-1], count - 1)

    def _add_op(self, i: int, op: Operator) -> None:
        rng, graph = self.rng, self.graph
        sinks = self._choose_sinks(i)
        slots = _absorbers(op)
        rng.shuffle(slots)
        if 0 in slots and rng.random() < 0.75:  # the newest result usually flows through input 0
            slots.remove(0)
            slots.insert(0, 0)
        uses: dict[int, Use] = {}
        ranks: dict[int, int] = {}
        for slot, tid in zip(slots, sinks):
            uses[slot], ranks[slot] = _adapt(graph.tensors[tid], op.rank_options(slot, ranks), op.slots[slot].domain)
        anchor = next(iter(uses), None)
        for slot in range(op.arity):
            if slot in uses:
                continue
            options = op.rank_options(slot, ranks)
            if not options:
                raise StructureError(f"{op.name}: no admissible rank for input {slot}")
            reused = self._reuse(op, slot, options, uses) if op.slots[slot].domain not in FRESH_ONLY else None
            uses[slot] = reused or self._fresh(i, op, slot, options, anchor, ranks)
            ranks[slot] = graph.tensors[uses[slot].tensor].rank
            anchor = slot if anchor is None else anchor
        rank_list = [ranks[s] for s in range(op.arity)]
        try:
            attrs = op.sample_attrs(rng, rank_list)
            out_rank = op.output_rank(rank_list, attrs, guards=True)
        except ShapeError as exc:
            raise StructureError(f"{op.name}: {exc}") from exc
        ordered = [uses[s] for s in range(op.arity)]
        out_range = op.output_range([_use_range(graph, u) for u in ordered], attrs)
        if out_range[0] == out_range[1]:
            raise StructureError(f"{op.name} would output the constant {out_range[0]}")
        first = graph.tensors[ordered[0].tensor]
        normalized = None if ordered[0].adapted or ordered[0].into else first.normalized
        if op.reduces is not None and normalized and normalized <= op.reduces(attrs, rank_list[0]):
            raise StructureError(f"{op.name} over normalised axes is constant")
        if op.normalizes is not None:
            normalized = op.normalizes(attrs, rank_list[0])
        elif op.category != "elementwise_unary":
            normalized = None
        out = graph.add_tensor(rank=out_rank, dtype=op.out_dtype, value_range=out_range, producer=i,
                               normalized=normalized)
        graph.ops.append(OpNode(i, op.name, ordered, attrs, out.id))
        self._pending_before = self.pending
        self.pending = [p for p in self.pending if p not in sinks] + [out.id]

    def _reuse(self, op: Operator, slot: int, options, uses: dict[int, Use]) -> Use | None:
        if self.rng.random() >= self.knobs.reuse:
            return None
        taken = {u.tensor for u in uses.values()}  # never the same tensor twice (x - x is constant)
        domain = op.slots[slot].domain
        candidates = [t.id for t in self.graph.tensors if t.id not in taken and t.id not in self.pending
                      and t.rank in options and _domain_ok(t, domain)]
        return Use(self.rng.choice(candidates)) if candidates else None

    def _fresh(self, i: int, op: Operator, slot: int, options, anchor: int | None, ranks: dict[int, int]) -> Use:
        spec = None
        if anchor is not None and op.fresh is not None:
            spec = op.fresh(self.rng, slot, anchor, ranks[anchor])
            if len(spec) not in options:
                spec = None
        if spec is None:
            prefer = ranks[anchor] if anchor is not None else None
            spec = ["free"] * _pick_rank(self.rng, options, prefer)
        dims = [d if isinstance(d, str) else (anchor, d) for d in spec]
        domain = op.slots[slot].domain
        node = self.graph.add_tensor(rank=len(dims), dtype=INPUT_DTYPES.get(domain, "float32"),
                                     value_range=INPUT_RANGES[domain], domain=domain, dims=dims, consumer=i)
        return Use(node.id)


def sample_graph(names: list[str], rng: random.Random, knobs: Knobs = Knobs()) -> Graph:
    """Wire operators ``names`` (in this order) into a single-output DAG; ranks only."""
    return _Builder(names, rng, knobs).build()
